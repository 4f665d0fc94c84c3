#include "worker/model/qwen3_layer.h"

#include "shared/error.h"

namespace flashq {

Tensor load_weight(const WeightStore& weights, const std::string& name, const Shape& shape, Backend& backend) {
  Tensor host = weights.get(name, shape);
  if (host.dtype() == DType::kI32) {
    throw Error(ErrorCode::kBadCheckpoint,
                "tensor '" + name + "' in " + weights.dir().string() + " is I32; weights must be F32, F16 or BF16");
  }
  return backend.upload_weight(host);
}

Qwen3Layer load_qwen3_layer(const WeightStore& weights, const std::string& p, const ModelConfig& c, Backend& backend) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
  for (const char* bias : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias", "self_attn.o_proj.bias"}) {
    if (weights.contains(p + bias)) {
      throw Error(ErrorCode::kUnsupported, "tensor '" + p + bias + "' in " + weights.dir().string() +
                                               ": attention biases are not supported");
    }
  }
  auto w = [&](const std::string& name, const Shape& shape) { return load_weight(weights, p + name, shape, backend); };
  return Qwen3Layer{
      .input_norm = w("input_layernorm.weight", {hidden}),
      .q_proj = w("self_attn.q_proj.weight", {q_width, hidden}),
      .k_proj = w("self_attn.k_proj.weight", {kv_width, hidden}),
      .v_proj = w("self_attn.v_proj.weight", {kv_width, hidden}),
      .o_proj = w("self_attn.o_proj.weight", {hidden, q_width}),
      .q_norm = w("self_attn.q_norm.weight", {c.head_dim}),
      .k_norm = w("self_attn.k_norm.weight", {c.head_dim}),
      .post_attention_norm = w("post_attention_layernorm.weight", {hidden}),
      .gate_proj = w("mlp.gate_proj.weight", {inter, hidden}),
      .up_proj = w("mlp.up_proj.weight", {inter, hidden}),
      .down_proj = w("mlp.down_proj.weight", {hidden, inter}),
  };
}

void project_qkv(Backend& backend, const Qwen3Layer& layer, const ModelConfig& c, const Tensor& normed, Tensor& q,
                 Tensor& k, Tensor& v) {
  const int64_t rows = normed.dim(0), head_dim = c.head_dim;
  Tensor q_flat = q.reshape({rows, c.num_heads * head_dim});
  Tensor k_flat = k.reshape({rows, c.num_kv_heads * head_dim});
  Tensor v_flat = v.reshape({rows, c.num_kv_heads * head_dim});
  const WeightProduct products[] = {{&layer.q_proj, &q_flat}, {&layer.k_proj, &k_flat}, {&layer.v_proj, &v_flat}};
  backend.matmul_many(normed, products);
}

QkNormRope qk_norm_rope(const Qwen3Layer& layer, const ModelConfig& c, const Tensor& positions) {
  return {.q_norm = &layer.q_norm,
          .k_norm = &layer.k_norm,
          .positions = &positions,
          .eps = c.rms_norm_eps,
          .rope = {.theta = static_cast<float>(c.rope_theta), .scaling = c.rope_scaling}};
}

void run_swiglu_mlp(Backend& backend, Workspace& workspace, const Qwen3Layer& layer, int64_t inter,
                    const Tensor& normed, Tensor& out) {
  const int64_t rows = normed.dim(0);
  Tensor gate = workspace.get("mlp_gate", DType::kF32, {rows, inter});
  Tensor up = workspace.get("mlp_up", DType::kF32, {rows, inter});
  backend.matmul_swiglu(normed, layer.gate_proj, layer.up_proj, gate, up);
  backend.matmul(gate, layer.down_proj, out);
}

}  // namespace flashq
