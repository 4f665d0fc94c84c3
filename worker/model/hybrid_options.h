// What the hybrid families (Qwen3.5, Qwen3.5-MoE, Qwen3-Next; docs/models.md) share in their
// config.json: the layer plan (every full_attention_interval-th layer attends, the others are
// Gated DeltaNet, unless layer_types lists them), the linear-attention sizes, the gated attention
// with partial rotary, zero-centred norms, and the shared expert of their sparse blocks.
#pragma once

#include "worker/model/config_reader.h"
#include "worker/model/model_config.h"

namespace flashq {

// The keys every hybrid family reads, with Hugging Face's defaults; `grouped_projection` says
// which published layout the linear layers' input projections have.
void read_hybrid_options(const ConfigReader& reader, ModelConfig& config, bool grouped_projection);

// The experts and the shared expert of a hybrid MoE family (num_experts, num_experts_per_tok,
// moe_intermediate_size, shared_expert_intermediate_size), with the given defaults.
struct HybridExpertDefaults {
  int64_t num_experts = 0, experts_per_token = 0, intermediate_size = 0, shared_intermediate_size = 0;
};
void read_hybrid_experts(const ConfigReader& reader, ModelConfig& config, const HybridExpertDefaults& defaults);

}  // namespace flashq
