// One pre-norm decoder layer (Qwen3, Llama, Qwen3-MoE, gpt-oss, the hybrid Qwen3.5 / Qwen3-Next):
// its weights and the parts of its computation that do not depend on what attention sees. The
// families differ only in options the config decides (ModelConfig): Qwen3's per-head q/k norm,
// Llama's optional attention and MLP biases, RoPE's scaling, a mixture of experts in place of the
// dense MLP, and the hybrids' Gated DeltaNet (gated_delta_net.h) in place of attention on their
// linear layers, output gate on the others and zero-centred norms. Shared by the target (causal over its
// KV cache) and the DFlash drafter (non-causal over the draft block and the injected context).
#pragma once

#include <optional>
#include <string>

#include "kernels/backend.h"
#include "worker/model/gated_delta_net.h"
#include "worker/model/model_config.h"
#include "worker/model/moe_mlp.h"
#include "worker/model/safetensors.h"
#include "worker/model/workspace.h"

namespace flashq {

// Optional tensors are undefined when the layer has none (Tensor::defined()).
struct DecoderLayer {
  Tensor input_norm, q_proj, k_proj, v_proj, o_proj;
  Tensor q_norm, k_norm;                  // config.qk_norm
  Tensor q_bias, k_bias, v_bias, o_bias;  // config.attention_bias
  Tensor q_gate_proj, q_gate_bias;        // config.attention_output_gate: q_proj's gate rows
  Tensor sinks;                           // config.attention_sinks: [heads]
  Tensor post_attention_norm, gate_proj, up_proj, down_proj;
  Tensor gate_bias, up_bias, down_bias;  // config.mlp_bias
  std::optional<MoeMlp> moe;             // a sparse layer's experts, in place of gate/up/down
  // A linear-attention layer's mixer, in place of the attention tensors (undefined then).
  std::optional<GatedDeltaNet> linear_attention;
};

// A weight of `shape` for `backend`; kBadCheckpoint when it is not f32, f16 or bf16 (MXFP4's
// bytes are read by moe_mlp.h).
Tensor load_weight(const WeightStore& weights, const std::string& name, const Shape& shape, Backend& backend);

// An RMSNorm weight: as stored, or float32 1 + w when the config's norms are zero-centred.
Tensor load_norm(const WeightStore& weights, const std::string& name, const Shape& shape, const ModelConfig& config,
                 Backend& backend);

// Tensors `prefix`input_layernorm.weight, `prefix`self_attn.q_proj.weight, ..., with the norms
// and biases the config names; with `sparse_mlp`, the experts (load_moe_mlp) in place of the
// dense MLP; with `linear_attention`, `prefix`linear_attn.* in place of self_attn.*.
// kBadCheckpoint for a bias tensor the config does not name (it would be silently dropped
// otherwise); kNotFound, as for any tensor, for a named one missing.
DecoderLayer load_decoder_layer(const WeightStore& weights, const std::string& prefix, const ModelConfig& config,
                                Backend& backend, bool sparse_mlp = false, bool linear_attention = false);

// q[M, Hq, D], k[M, Hkv, D], v[M, Hkv, D]: the projections of `normed` rows (with their biases),
// and `gate` [M, Hq, D] when the layer gates its output (given then). The q/k norm and RoPE
// come next, in Backend::store_and_attend (qk_norm_rope).
void project_qkv(Backend& backend, const DecoderLayer& layer, const ModelConfig& config, const Tensor& normed,
                 Tensor& q, Tensor& k, Tensor& v, Tensor* gate = nullptr);

// The layer's q_norm and k_norm (null when it has none) and RoPE at `positions`, for
// Backend::store_and_attend (V is never normalised). Holds pointers to `layer` and `positions`.
QkNormRope qk_norm_rope(const DecoderLayer& layer, const ModelConfig& config, const Tensor& positions);

// The layer's sinks (when it has them) and the window of layer `layer_index`, for the attention
// ops. Holds a pointer to `layer`.
AttentionOptions attention_options(const DecoderLayer& layer, const ModelConfig& config, int64_t layer_index);

// out = o_proj(attended) (+ o_bias); attended [M, Hq, D].
void project_attention_out(Backend& backend, const DecoderLayer& layer, const Tensor& attended, Tensor& out);

// out = down(silu(gate(normed)) * up(normed)), each product with its bias when it has one.
void run_swiglu_mlp(Backend& backend, Workspace& workspace, const DecoderLayer& layer, int64_t intermediate_size,
                    const Tensor& normed, Tensor& out);

// out = the layer's MLP of `normed`: its experts when it has them, else the dense SwiGLU MLP.
void run_mlp(Backend& backend, Workspace& workspace, const DecoderLayer& layer, const ModelConfig& config,
             const Tensor& normed, Tensor& out);

}  // namespace flashq
