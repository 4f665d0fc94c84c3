#include "worker/model/qwen3_5_moe.h"

#include "worker/model/hybrid_options.h"

namespace flashq {
namespace {

void read_qwen3_5_moe(const ConfigReader& reader, ModelConfig& config) {
  read_hybrid_options(reader, config, /*grouped_projection=*/false);
  read_hybrid_experts(
      reader, config,
      {.num_experts = 256, .experts_per_token = 8, .intermediate_size = 512, .shared_intermediate_size = 512});
  // Its router always renormalises the chosen experts' weights (the config has no norm_topk_prob),
  // and every layer is sparse.
  config.moe.normalize_top_k = true;
  config.moe.sparse_step = 1;
  config.moe.layout = ExpertLayout::kFusedGateUp;
}

}  // namespace

ModelFamily qwen3_5_moe_family() {
  return {.model_type = "qwen3_5_moe",
          .model_type_aliases = {"qwen3_5_moe_text"},
          .architectures = {"Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"},
          // No dense MLP: intermediate_size is never read, so it may be absent.
          .config_defaults = {.num_kv_heads = 2,
                              .head_dim = 256,
                              .max_position_embeddings = 32768,
                              .rms_norm_eps = 1e-6,
                              .rope_theta = 10000.0,
                              .intermediate_size = 1},
          .qk_norm = true,
          .reads_mlp_bias = false,
          .linear_attention = true,
          .read_family_options = read_qwen3_5_moe};
}

}  // namespace flashq
