#include "worker/model/decoder_layer.h"

#include "shared/error.h"
#include "worker/model/host_weights.h"

namespace flashq {
namespace {

// The bias tensor `name` when the config names it, else undefined; refuses a checkpoint whose
// tensors and config disagree.
Tensor load_bias(const WeightStore& weights, const std::string& name, int64_t size, bool named, Backend& backend) {
  if (named) return load_weight(weights, name, {size}, backend);
  if (weights.contains(name)) {
    throw Error(ErrorCode::kBadCheckpoint, "tensor '" + name + "' in " + weights.dir().string() +
                                               " is a bias that config.json does not name (attention_bias, "
                                               "mlp_bias)");
  }
  return Tensor();
}

// q_proj (and its bias) of a layer that gates its output: per head the query's head_dim rows,
// then the gate's; split into the queries of every head and the gates of every head.
void load_gated_query(const WeightStore& weights, const std::string& p, const ModelConfig& c, Backend& backend,
                      DecoderLayer& layer) {
  const int64_t d = c.head_dim, heads = c.num_heads;
  const std::vector<RowRun> queries = rows_of_each_group(heads, 2 * d, 0, d);
  const std::vector<RowRun> gates = rows_of_each_group(heads, 2 * d, d, d);
  const Tensor q = weights.get(p + "self_attn.q_proj.weight", {2 * heads * d, c.hidden_size});
  layer.q_proj = backend.upload_weight(gather_host_rows(q, queries));
  layer.q_gate_proj = backend.upload_weight(gather_host_rows(q, gates));
  if (c.attention_bias) {
    const Tensor bias = weights.get(p + "self_attn.q_proj.bias", {2 * heads * d});
    layer.q_bias = backend.upload_weight(gather_host_rows(bias, queries));
    layer.q_gate_bias = backend.upload_weight(gather_host_rows(bias, gates));
  }
}

// The attention's tensors: q, k, v and o projections, their biases, sinks and q/k norms.
void load_attention(const WeightStore& weights, const std::string& p, const ModelConfig& c, Backend& backend,
                    DecoderLayer& layer) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
  auto w = [&](const std::string& name, const Shape& shape) { return load_weight(weights, p + name, shape, backend); };
  auto bias = [&](const std::string& name, int64_t size, bool named) {
    return load_bias(weights, p + name, size, named, backend);
  };
  if (c.attention_output_gate) {
    load_gated_query(weights, p, c, backend, layer);
  } else {
    layer.q_proj = w("self_attn.q_proj.weight", {q_width, hidden});
    layer.q_bias = bias("self_attn.q_proj.bias", q_width, c.attention_bias);
  }
  layer.k_proj = w("self_attn.k_proj.weight", {kv_width, hidden});
  layer.v_proj = w("self_attn.v_proj.weight", {kv_width, hidden});
  layer.o_proj = w("self_attn.o_proj.weight", {hidden, q_width});
  layer.k_bias = bias("self_attn.k_proj.bias", kv_width, c.attention_bias);
  layer.v_bias = bias("self_attn.v_proj.bias", kv_width, c.attention_bias);
  layer.o_bias = bias("self_attn.o_proj.bias", hidden, c.attention_bias);
  if (c.attention_sinks) layer.sinks = w("self_attn.sinks", {c.num_heads});
  if (c.qk_norm) {
    layer.q_norm = load_norm(weights, p + "self_attn.q_norm.weight", {c.head_dim}, c, backend);
    layer.k_norm = load_norm(weights, p + "self_attn.k_norm.weight", {c.head_dim}, c, backend);
  }
}

}  // namespace

Tensor load_norm(const WeightStore& weights, const std::string& name, const Shape& shape, const ModelConfig& config,
                 Backend& backend) {
  if (!config.zero_centred_norms) return load_weight(weights, name, shape, backend);
  return backend.upload_weight(one_plus_weight(weights.get(name, shape)));
}

Tensor load_weight(const WeightStore& weights, const std::string& name, const Shape& shape, Backend& backend) {
  Tensor host = weights.get(name, shape);
  if (host.dtype() == DType::kI32 || host.dtype() == DType::kU8) {
    throw Error(ErrorCode::kBadCheckpoint, "tensor '" + name + "' in " + weights.dir().string() + " is " +
                                               std::string(dtype_name(host.dtype())) +
                                               "; weights must be F32, F16 or BF16");
  }
  return backend.upload_weight(host);
}

DecoderLayer load_decoder_layer(const WeightStore& weights, const std::string& p, const ModelConfig& c,
                                Backend& backend, bool sparse_mlp, bool linear_attention) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  auto w = [&](const std::string& name, const Shape& shape) { return load_weight(weights, p + name, shape, backend); };
  auto bias = [&](const std::string& name, int64_t size, bool named) {
    return load_bias(weights, p + name, size, named, backend);
  };
  DecoderLayer layer{
      .input_norm = load_norm(weights, p + "input_layernorm.weight", {hidden}, c, backend),
      .post_attention_norm = load_norm(weights, p + "post_attention_layernorm.weight", {hidden}, c, backend),
  };
  if (linear_attention) {
    layer.linear_attention = load_gated_delta_net(weights, p, c, backend);
  } else {
    load_attention(weights, p, c, backend, layer);
  }
  if (sparse_mlp) {
    layer.moe = load_moe_mlp(weights, p, c, backend);
  } else {
    layer.gate_proj = w("mlp.gate_proj.weight", {inter, hidden});
    layer.up_proj = w("mlp.up_proj.weight", {inter, hidden});
    layer.down_proj = w("mlp.down_proj.weight", {hidden, inter});
    layer.gate_bias = bias("mlp.gate_proj.bias", inter, c.mlp_bias);
    layer.up_bias = bias("mlp.up_proj.bias", inter, c.mlp_bias);
    layer.down_bias = bias("mlp.down_proj.bias", hidden, c.mlp_bias);
  }
  return layer;
}

void project_qkv(Backend& backend, const DecoderLayer& layer, const ModelConfig& c, const Tensor& normed, Tensor& q,
                 Tensor& k, Tensor& v, Tensor* gate) {
  const int64_t rows = normed.dim(0), head_dim = c.head_dim;
  Tensor q_flat = q.reshape({rows, c.num_heads * head_dim});
  Tensor k_flat = k.reshape({rows, c.num_kv_heads * head_dim});
  Tensor v_flat = v.reshape({rows, c.num_kv_heads * head_dim});
  const bool gated = layer.q_gate_proj.defined();
  check_invariant(!gated || gate != nullptr, "a gated layer's gate has somewhere to go");
  Tensor gate_flat = gated ? gate->reshape({rows, c.num_heads * head_dim}) : Tensor();
  const WeightProduct products[] = {
      {&layer.q_proj, &q_flat}, {&layer.k_proj, &k_flat}, {&layer.v_proj, &v_flat}, {&layer.q_gate_proj, &gate_flat}};
  backend.matmul_many(normed, std::span(products).first(gated ? 4 : 3));
  if (layer.q_bias.defined()) {
    backend.add_bias(q_flat, layer.q_bias);
    backend.add_bias(k_flat, layer.k_bias);
    backend.add_bias(v_flat, layer.v_bias);
    if (gated) backend.add_bias(gate_flat, layer.q_gate_bias);
  }
}

QkNormRope qk_norm_rope(const DecoderLayer& layer, const ModelConfig& c, const Tensor& positions) {
  return {.q_norm = layer.q_norm.defined() ? &layer.q_norm : nullptr,
          .k_norm = layer.k_norm.defined() ? &layer.k_norm : nullptr,
          .positions = &positions,
          .eps = c.rms_norm_eps,
          .rope = rope_options(c)};
}

AttentionOptions attention_options(const DecoderLayer& layer, const ModelConfig& config, int64_t layer_index) {
  return {.sinks = layer.sinks.defined() ? &layer.sinks : nullptr,
          .sliding_window = attention_window(config, layer_index)};
}

void project_attention_out(Backend& backend, const DecoderLayer& layer, const Tensor& attended, Tensor& out) {
  backend.matmul(attended.reshape({attended.dim(0), attended.dim(1) * attended.dim(2)}), layer.o_proj, out);
  if (layer.o_bias.defined()) backend.add_bias(out, layer.o_bias);
}

void run_swiglu_mlp(Backend& backend, Workspace& workspace, const DecoderLayer& layer, int64_t inter,
                    const Tensor& normed, Tensor& out) {
  const int64_t rows = normed.dim(0);
  Tensor gate = workspace.get("mlp_gate", DType::kF32, {rows, inter});
  Tensor up = workspace.get("mlp_up", DType::kF32, {rows, inter});
  if (layer.gate_bias.defined()) {
    // The biases go in before the gate, so the fused product-and-gate cannot be used.
    backend.matmul(normed, layer.gate_proj, gate);
    backend.add_bias(gate, layer.gate_bias);
    backend.matmul(normed, layer.up_proj, up);
    backend.add_bias(up, layer.up_bias);
    backend.swiglu(gate, up, gate);
  } else {
    backend.matmul_swiglu(normed, layer.gate_proj, layer.up_proj, gate, up);
  }
  backend.matmul(gate, layer.down_proj, out);
  if (layer.down_bias.defined()) backend.add_bias(out, layer.down_bias);
}

void run_mlp(Backend& backend, Workspace& workspace, const DecoderLayer& layer, const ModelConfig& config,
             const Tensor& normed, Tensor& out) {
  if (layer.moe) {
    run_moe_mlp(backend, workspace, *layer.moe, config, normed, out);
  } else {
    run_swiglu_mlp(backend, workspace, layer, config.intermediate_size, normed, out);
  }
}

}  // namespace flashq
