// The Qwen3 mixture-of-experts family (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): model_type
// qwen3_moe, Qwen3MoeForCausalLM, with Hugging Face's Qwen3MoeConfig defaults. Qwen3's attention
// (q/k norm, no biases); on the layers decoder_sparse_step and mlp_only_layers make sparse, the
// MLP is num_experts SwiGLU experts of moe_intermediate_size, num_experts_per_tok of them per
// token, chosen by a softmax over the router's logits (renormalised over the chosen when
// norm_topk_prob); elsewhere a dense MLP of intermediate_size. The decoder model
// (decoder_model.h) runs it; the experts are worker/model/moe_mlp.h.
#pragma once

#include "worker/model/model_registry.h"

namespace flashq {

ModelFamily qwen3_moe_family();

}  // namespace flashq
