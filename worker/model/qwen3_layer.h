// One pre-norm Qwen3 decoder layer's weights and the parts of its computation that do not depend
// on what attention sees. Shared by the target (causal over its KV cache) and the DFlash drafter
// (non-causal over the draft block and the injected context).
#pragma once

#include <string>

#include "kernels/backend.h"
#include "worker/model/model_config.h"
#include "worker/model/safetensors.h"
#include "worker/model/workspace.h"

namespace flashq {

struct Qwen3Layer {
  Tensor input_norm, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  Tensor post_attention_norm, gate_proj, up_proj, down_proj;
};

// A weight of `shape` for `backend`; kBadCheckpoint when it is not f32, f16 or bf16.
Tensor load_weight(const WeightStore& weights, const std::string& name, const Shape& shape, Backend& backend);

// Tensors `prefix`input_layernorm.weight, `prefix`self_attn.q_proj.weight, ...
Qwen3Layer load_qwen3_layer(const WeightStore& weights, const std::string& prefix, const ModelConfig& config,
                            Backend& backend);

// q[M, Hq, D], k[M, Hkv, D], v[M, Hkv, D]: the projections of `normed` rows, in one call. The
// per-head q_norm and k_norm and RoPE come next, in Backend::store_and_attend (qk_norm_rope).
void project_qkv(Backend& backend, const Qwen3Layer& layer, const ModelConfig& config, const Tensor& normed, Tensor& q,
                 Tensor& k, Tensor& v);

// The layer's q_norm and k_norm and RoPE at `positions`, for Backend::store_and_attend (V is
// never normalised). Holds pointers to `layer` and `positions`.
QkNormRope qk_norm_rope(const Qwen3Layer& layer, const ModelConfig& config, const Tensor& positions);

// out = down(silu(gate(normed)) * up(normed)).
void run_swiglu_mlp(Backend& backend, Workspace& workspace, const Qwen3Layer& layer, int64_t intermediate_size,
                    const Tensor& normed, Tensor& out);

}  // namespace flashq
