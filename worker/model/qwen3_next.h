// The Qwen3-Next family (Qwen3-Next-80B-A3B; docs/models.md): model_type qwen3_next,
// Qwen3NextForCausalLM, with Hugging Face's Qwen3NextConfig defaults. The hybrid layers with the
// linear layers' input projections grouped per key head (in_proj_qkvz, in_proj_ba); sparse blocks
// where decoder_sparse_step and mlp_only_layers say (per-expert tensors, renormalised when
// norm_topk_prob), each with the shared expert; dense SwiGLU MLPs elsewhere.
#pragma once

#include "worker/model/model_registry.h"

namespace flashq {

ModelFamily qwen3_next_family();

}  // namespace flashq
