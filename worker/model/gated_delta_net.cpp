#include "worker/model/gated_delta_net.h"

#include <vector>

#include "worker/model/decoder_layer.h"
#include "worker/model/host_weights.h"
#include "worker/model/recurrent_state.h"

namespace flashq {
namespace {

// Qwen3-Next's in_proj_qkvz and in_proj_ba, regrouped: per key head j, qkvz holds q_j [dk], k_j
// [dk], then its r = value heads / key heads value heads' v [r dv] and z [r dv]; ba holds b then
// a of those r heads. Gathering each part over the groups gives Qwen3.5's flat order.
void load_grouped_projections(const WeightStore& weights, const std::string& a, const ModelConfig& c, Backend& backend,
                              GatedDeltaNet& layer) {
  const LinearAttentionConfig& l = c.linear_attention;
  const int64_t dk = l.key_head_dim, r = l.value_heads / l.key_heads, rdv = r * l.value_head_dim;
  const int64_t group = 2 * dk + 2 * rdv;
  const Tensor qkvz = weights.get(a + "in_proj_qkvz.weight", {l.key_heads * group, c.hidden_size});
  const Tensor ba = weights.get(a + "in_proj_ba.weight", {l.key_heads * 2 * r, c.hidden_size});
  auto part = [&](const Tensor& fused, int64_t group_rows, int64_t offset, int64_t count) {
    return backend.upload_weight(gather_host_rows(fused, rows_of_each_group(l.key_heads, group_rows, offset, count)));
  };
  layer.q_proj = part(qkvz, group, 0, dk);
  layer.k_proj = part(qkvz, group, dk, dk);
  layer.v_proj = part(qkvz, group, 2 * dk, rdv);
  layer.z_proj = part(qkvz, group, 2 * dk + rdv, rdv);
  layer.b_proj = part(ba, 2 * r, 0, r);
  layer.a_proj = part(ba, 2 * r, r, r);
}

// Qwen3.5's in_proj_qkv (q, k, v rows in order), in_proj_z, in_proj_b and in_proj_a.
void load_flat_projections(const WeightStore& weights, const std::string& a, const ModelConfig& c, Backend& backend,
                           GatedDeltaNet& layer) {
  const LinearAttentionConfig& l = c.linear_attention;
  const int64_t kd = l.key_dim(), vd = l.value_dim(), hidden = c.hidden_size;
  const Tensor qkv = weights.get(a + "in_proj_qkv.weight", {2 * kd + vd, hidden});
  const RowRun q{0, kd}, k{kd, kd}, v{2 * kd, vd};
  layer.q_proj = backend.upload_weight(gather_host_rows(qkv, {&q, 1}));
  layer.k_proj = backend.upload_weight(gather_host_rows(qkv, {&k, 1}));
  layer.v_proj = backend.upload_weight(gather_host_rows(qkv, {&v, 1}));
  layer.z_proj = load_weight(weights, a + "in_proj_z.weight", {vd, hidden}, backend);
  layer.b_proj = load_weight(weights, a + "in_proj_b.weight", {l.value_heads, hidden}, backend);
  layer.a_proj = load_weight(weights, a + "in_proj_a.weight", {l.value_heads, hidden}, backend);
}

// The conv's inputs and outputs of one pass, per part.
struct ConvParts {
  Tensor x_q, x_k, x_v;  // the projections
  Tensor q, k, v;        // after the conv and SiLU
};

ConvParts conv_parts(Workspace& workspace, const LinearAttentionConfig& l, int64_t rows) {
  return {.x_q = workspace.get("dn_x_q", DType::kF32, {rows, l.key_dim()}),
          .x_k = workspace.get("dn_x_k", DType::kF32, {rows, l.key_dim()}),
          .x_v = workspace.get("dn_x_v", DType::kF32, {rows, l.value_dim()}),
          .q = workspace.get("dn_q", DType::kF32, {rows, l.key_dim()}),
          .k = workspace.get("dn_k", DType::kF32, {rows, l.key_dim()}),
          .v = workspace.get("dn_v", DType::kF32, {rows, l.value_dim()})};
}

// The states of one linear layer for every chunk, as the conv and delta-rule ops take them.
struct LayerStates {
  std::vector<StateChunk> conv_q, conv_k, conv_v, matrix;
  void add(RecurrentState::Layer& state, int64_t first, int64_t rows) {
    conv_q.push_back({&state.conv_q, first, rows});
    conv_k.push_back({&state.conv_k, first, rows});
    conv_v.push_back({&state.conv_v, first, rows});
    matrix.push_back({&state.matrix, first, rows});
  }
};

// The conv over each part, then the delta rule (in its chunked form with `chunked`); `o` [R,
// value heads, value head dim].
void run_recurrence(Backend& backend, const GatedDeltaNet& layer, const LinearAttentionConfig& l, ConvParts& parts,
                    const Tensor& g, const Tensor& beta, const LayerStates& states, bool chunked, Tensor& o) {
  const int64_t rows = parts.q.dim(0);
  backend.causal_conv1d(parts.x_q, layer.q_conv, states.conv_q, parts.q);
  backend.causal_conv1d(parts.x_k, layer.k_conv, states.conv_k, parts.k);
  backend.causal_conv1d(parts.x_v, layer.v_conv, states.conv_v, parts.v);
  const Tensor q = parts.q.reshape({rows, l.key_heads, l.key_head_dim});
  const Tensor k = parts.k.reshape({rows, l.key_heads, l.key_head_dim});
  const Tensor v = parts.v.reshape({rows, l.value_heads, l.value_head_dim});
  if (chunked) {
    backend.gated_delta_rule_chunked(q, k, v, g, beta, states.matrix, o);
  } else {
    backend.gated_delta_rule(q, k, v, g, beta, states.matrix, o);
  }
}

}  // namespace

GatedDeltaNet load_gated_delta_net(const WeightStore& weights, const std::string& prefix, const ModelConfig& c,
                                   Backend& backend) {
  const LinearAttentionConfig& l = c.linear_attention;
  const std::string a = prefix + "linear_attn.";
  GatedDeltaNet layer;
  if (l.grouped_projection) {
    load_grouped_projections(weights, a, c, backend, layer);
  } else {
    load_flat_projections(weights, a, c, backend, layer);
  }
  const int64_t kd = l.key_dim(), vd = l.value_dim(), taps = l.conv_kernel;
  const Tensor conv = weights.get(a + "conv1d.weight", {2 * kd + vd, 1, taps}).reshape({2 * kd + vd, taps});
  const RowRun q{0, kd}, k{kd, kd}, v{2 * kd, vd};
  layer.q_conv = backend.upload_weight(gather_host_rows(conv, {&q, 1}));
  layer.k_conv = backend.upload_weight(gather_host_rows(conv, {&k, 1}));
  layer.v_conv = backend.upload_weight(gather_host_rows(conv, {&v, 1}));
  layer.a_log = load_weight(weights, a + "A_log", {l.value_heads}, backend);
  layer.dt_bias = load_weight(weights, a + "dt_bias", {l.value_heads}, backend);
  layer.norm = load_weight(weights, a + "norm.weight", {l.value_head_dim}, backend);
  layer.out_proj = load_weight(weights, a + "out_proj.weight", {c.hidden_size, vd}, backend);
  return layer;
}

void run_gated_delta_net(Backend& backend, Workspace& workspace, const GatedDeltaNet& layer, const ModelConfig& c,
                         int64_t linear_index, std::span<const SequenceChunk> chunks, const Tensor& normed,
                         bool chunked_prefill, Tensor& out) {
  const LinearAttentionConfig& l = c.linear_attention;
  const int64_t rows = normed.dim(0);
  ConvParts parts = conv_parts(workspace, l, rows);
  Tensor z = workspace.get("dn_z", DType::kF32, {rows, l.value_dim()});
  Tensor b = workspace.get("dn_b", DType::kF32, {rows, l.value_heads});
  Tensor a = workspace.get("dn_a", DType::kF32, {rows, l.value_heads});
  const WeightProduct products[] = {{&layer.q_proj, &parts.x_q}, {&layer.k_proj, &parts.x_k},
                                    {&layer.v_proj, &parts.x_v}, {&layer.z_proj, &z},
                                    {&layer.b_proj, &b},         {&layer.a_proj, &a}};
  backend.matmul_many(normed, products);
  Tensor g = workspace.get("dn_g", DType::kF32, {rows, l.value_heads});
  Tensor beta = workspace.get("dn_beta", DType::kF32, {rows, l.value_heads});
  backend.delta_rule_gates(a, b, layer.a_log, layer.dt_bias, g, beta);

  LayerStates states;
  int64_t first = 0;
  // A prefill: rows of a prompt, none of which may be truncated after (a decode row is not one).
  bool prefill = rows > static_cast<int64_t>(chunks.size());
  for (const SequenceChunk& chunk : chunks) {
    const auto n = static_cast<int64_t>(chunk.tokens.size());
    RecurrentState& state = *chunk.cache->recurrent();
    states.add(state.layer(linear_index), first, n);
    prefill = prefill && !state.keeps_inputs();
    if (state.keeps_inputs()) {
      RecurrentState::PassInputs& kept = state.inputs(linear_index);
      backend.copy_rows(parts.x_q.slice_rows(first, n), kept.x_q, 0);
      backend.copy_rows(parts.x_k.slice_rows(first, n), kept.x_k, 0);
      backend.copy_rows(parts.x_v.slice_rows(first, n), kept.x_v, 0);
      backend.copy_rows(g.slice_rows(first, n), kept.g, 0);
      backend.copy_rows(beta.slice_rows(first, n), kept.beta, 0);
    }
    first += n;
  }
  Tensor o = workspace.get("dn_o", DType::kF32, {rows, l.value_heads, l.value_head_dim});
  run_recurrence(backend, layer, l, parts, g, beta, states, chunked_prefill && prefill, o);
  backend.gated_rmsnorm(o, z.reshape({rows, l.value_heads, l.value_head_dim}), layer.norm, c.rms_norm_eps, o);
  backend.matmul(o.reshape({rows, l.value_dim()}), layer.out_proj, out);
}

void replay_kept_rows(Backend& backend, Workspace& workspace, const GatedDeltaNet& layer, const ModelConfig& c,
                      int64_t linear_index, RecurrentState& state) {
  const LinearAttentionConfig& l = c.linear_attention;
  const int64_t rows = state.kept_rows();
  if (rows <= 0) return;
  RecurrentState::PassInputs& kept = state.inputs(linear_index);
  ConvParts parts = conv_parts(workspace, l, rows);
  parts.x_q = kept.x_q.slice_rows(0, rows);
  parts.x_k = kept.x_k.slice_rows(0, rows);
  parts.x_v = kept.x_v.slice_rows(0, rows);
  LayerStates states;
  states.add(state.layer(linear_index), 0, rows);
  Tensor o = workspace.get("dn_o", DType::kF32, {rows, l.value_heads, l.value_head_dim});
  run_recurrence(backend, layer, l, parts, kept.g.slice_rows(0, rows), kept.beta.slice_rows(0, rows), states,
                 /*chunked=*/false, o);
}

}  // namespace flashq
