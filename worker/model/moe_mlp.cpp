#include "worker/model/moe_mlp.h"

#include "shared/error.h"
#include "worker/model/decoder_layer.h"

namespace flashq {
namespace {

// A tensor of raw bytes (MXFP4 blocks or scales) of `shape`; kBadCheckpoint when it is not U8.
Tensor load_bytes(const WeightStore& weights, const std::string& name, const Shape& shape) {
  Tensor host = weights.get(name, shape);
  if (host.dtype() != DType::kU8) {
    throw Error(ErrorCode::kBadCheckpoint, "tensor '" + name + "' in " + weights.dir().string() + " is " +
                                               std::string(dtype_name(host.dtype())) +
                                               "; MXFP4 blocks and scales are U8");
  }
  return host;
}

// Qwen3-MoE: a router without bias, and each expert's three projections as tensors of their own.
MoeMlp load_per_expert(const WeightStore& weights, const std::string& p, const ModelConfig& c, Backend& backend) {
  const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size;
  MoeMlp mlp;
  mlp.router.weight = load_weight(weights, p + "mlp.gate.weight", {c.moe.num_experts, hidden}, backend);
  for (int64_t e = 0; e < c.moe.num_experts; ++e) {
    const std::string expert = p + "mlp.experts." + std::to_string(e) + ".";
    ExpertWeights weights_of_expert;
    weights_of_expert.gate.weight = load_weight(weights, expert + "gate_proj.weight", {inter, hidden}, backend);
    weights_of_expert.up.weight = load_weight(weights, expert + "up_proj.weight", {inter, hidden}, backend);
    weights_of_expert.down.weight = load_weight(weights, expert + "down_proj.weight", {hidden, inter}, backend);
    mlp.experts.push_back(std::move(weights_of_expert));
  }
  return mlp;
}

// gpt-oss: a router with bias, and every expert's gate_up (gate and up interleaved by row) and
// down stacked along a first dimension of experts, in MXFP4 with a bias each. Expert e's weights
// are views of its slice, uploaded as they are stored (decoded only inside the kernels).
MoeMlp load_stacked_mxfp4(const WeightStore& weights, const std::string& p, const ModelConfig& c, Backend& backend) {
  const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size, experts = c.moe.num_experts;
  const int64_t block = kMxfp4BlockSize;
  for (const auto& [size, key] : {std::pair{hidden, "hidden_size"}, std::pair{inter, "intermediate_size"}}) {
    if (size % block != 0) {
      throw Error(ErrorCode::kBadCheckpoint, std::string(key) + " " + std::to_string(size) + " of " +
                                                 weights.dir().string() + " is not a multiple of MXFP4's block of 32");
    }
  }
  MoeMlp mlp;
  mlp.router.weight = load_weight(weights, p + "mlp.router.weight", {experts, hidden}, backend);
  mlp.router.bias = load_weight(weights, p + "mlp.router.bias", {experts}, backend);
  const std::string stack = p + "mlp.experts.";
  const Tensor gate_up_blocks =
      load_bytes(weights, stack + "gate_up_proj_blocks", {experts, 2 * inter, hidden / block, 16});
  const Tensor gate_up_scales =
      load_bytes(weights, stack + "gate_up_proj_scales", {experts, 2 * inter, hidden / block});
  const Tensor gate_up_bias = weights.get(stack + "gate_up_proj_bias", {experts, 2 * inter});
  const Tensor down_blocks = load_bytes(weights, stack + "down_proj_blocks", {experts, hidden, inter / block, 16});
  const Tensor down_scales = load_bytes(weights, stack + "down_proj_scales", {experts, hidden, inter / block});
  const Tensor down_bias = weights.get(stack + "down_proj_bias", {experts, hidden});
  auto slice = [&backend](const Tensor& stacked, int64_t e, Shape shape) {
    return backend.upload_weight(stacked.slice_rows(e, 1).reshape(std::move(shape)));
  };
  for (int64_t e = 0; e < experts; ++e) {
    ExpertWeights expert;
    expert.gate_up = {.weight = slice(gate_up_blocks, e, {2 * inter, hidden / 2}),
                      .scales = slice(gate_up_scales, e, {2 * inter, hidden / block}),
                      .bias = slice(gate_up_bias, e, {2 * inter})};
    expert.down = {.weight = slice(down_blocks, e, {hidden, inter / 2}),
                   .scales = slice(down_scales, e, {hidden, inter / block}),
                   .bias = slice(down_bias, e, {hidden})};
    mlp.experts.push_back(std::move(expert));
  }
  return mlp;
}

// Qwen3.5-MoE: a router without bias, and every expert's gate and up projections fused and
// stacked (gate_up_proj [E, 2I, H], gate rows first) and its down projections stacked
// (down_proj [E, H, I]).
MoeMlp load_fused_gate_up(const WeightStore& weights, const std::string& p, const ModelConfig& c, Backend& backend) {
  const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size, experts = c.moe.num_experts;
  MoeMlp mlp;
  mlp.router.weight = load_weight(weights, p + "mlp.gate.weight", {experts, hidden}, backend);
  const Tensor gate_up = weights.get(p + "mlp.experts.gate_up_proj", {experts, 2 * inter, hidden});
  const Tensor down = weights.get(p + "mlp.experts.down_proj", {experts, hidden, inter});
  for (const Tensor* stacked : {&gate_up, &down}) {
    if (stacked->dtype() == DType::kI32 || stacked->dtype() == DType::kU8) {
      throw Error(ErrorCode::kBadCheckpoint,
                  "the experts of " + p + " in " + weights.dir().string() + " must be F32, F16 or BF16");
    }
  }
  for (int64_t e = 0; e < experts; ++e) {
    const Tensor both = gate_up.slice_rows(e, 1).reshape({2 * inter, hidden});
    ExpertWeights expert;
    expert.gate.weight = backend.upload_weight(both.slice_rows(0, inter));
    expert.up.weight = backend.upload_weight(both.slice_rows(inter, inter));
    expert.down.weight = backend.upload_weight(down.slice_rows(e, 1).reshape({hidden, inter}));
    mlp.experts.push_back(std::move(expert));
  }
  return mlp;
}

// The shared expert beside the routed ones (Qwen3.5-MoE, Qwen3-Next).
void load_shared_expert(const WeightStore& weights, const std::string& p, const ModelConfig& c, Backend& backend,
                        MoeMlp& mlp) {
  const int64_t hidden = c.hidden_size, inter = c.moe.shared_expert_intermediate_size;
  const std::string shared = p + "mlp.shared_expert.";
  mlp.shared_gate_proj = load_weight(weights, shared + "gate_proj.weight", {inter, hidden}, backend);
  mlp.shared_up_proj = load_weight(weights, shared + "up_proj.weight", {inter, hidden}, backend);
  mlp.shared_down_proj = load_weight(weights, shared + "down_proj.weight", {hidden, inter}, backend);
  mlp.shared_expert_gate = load_weight(weights, p + "mlp.shared_expert_gate.weight", {1, hidden}, backend);
}

// out += the shared expert of `normed`, gated per row.
void add_shared_expert(Backend& backend, Workspace& workspace, const MoeMlp& mlp, const ModelConfig& config,
                       const Tensor& normed, Tensor& out) {
  const int64_t rows = normed.dim(0), inter = config.moe.shared_expert_intermediate_size;
  Tensor gate = workspace.get("shared_expert_gate", DType::kF32, {rows, inter});
  Tensor up = workspace.get("shared_expert_up", DType::kF32, {rows, inter});
  Tensor shared = workspace.get("shared_expert_out", DType::kF32, {rows, config.hidden_size});
  Tensor gate_logit = workspace.get("shared_expert_gate_logit", DType::kF32, {rows, 1});
  backend.matmul_swiglu(normed, mlp.shared_gate_proj, mlp.shared_up_proj, gate, up);
  backend.matmul(gate, mlp.shared_down_proj, shared);
  backend.matmul(normed, mlp.shared_expert_gate, gate_logit);
  backend.sigmoid_gate(shared, gate_logit);
  backend.add(out, shared);
}

}  // namespace

MoeMlp load_moe_mlp(const WeightStore& weights, const std::string& prefix, const ModelConfig& config,
                    Backend& backend) {
  MoeMlp mlp;
  switch (config.moe.layout) {
    case ExpertLayout::kPerExpert:
      mlp = load_per_expert(weights, prefix, config, backend);
      break;
    case ExpertLayout::kStackedMxfp4:
      mlp = load_stacked_mxfp4(weights, prefix, config, backend);
      break;
    case ExpertLayout::kFusedGateUp:
      mlp = load_fused_gate_up(weights, prefix, config, backend);
      break;
  }
  if (config.moe.shared_expert_intermediate_size > 0) load_shared_expert(weights, prefix, config, backend, mlp);
  return mlp;
}

void run_moe_mlp(Backend& backend, Workspace& workspace, const MoeMlp& mlp, const ModelConfig& config,
                 const Tensor& normed, Tensor& out) {
  const int64_t rows = normed.dim(0), k = config.moe.experts_per_token;
  Tensor logits = workspace.get("moe_router_logits", DType::kF32, {rows, config.moe.num_experts});
  Tensor expert_ids = workspace.get("moe_expert_ids", DType::kI32, {rows, k});
  Tensor expert_weights = workspace.get("moe_expert_weights", DType::kF32, {rows, k});
  backend.linear(normed, mlp.router, logits);
  backend.moe_route(logits, config.moe.routing(), expert_ids, expert_weights);
  backend.moe_experts(normed, expert_ids, expert_weights, mlp.experts, config.moe.activation, out);
  if (mlp.shared_expert_gate.defined()) add_shared_expert(backend, workspace, mlp, config, normed, out);
}

}  // namespace flashq
