#include "worker/model/qwen3_next.h"

#include "worker/model/hybrid_options.h"
#include "worker/model/moe_options.h"

namespace flashq {
namespace {

void read_qwen3_next(const ConfigReader& reader, ModelConfig& config) {
  read_hybrid_options(reader, config, /*grouped_projection=*/true);
  read_hybrid_experts(
      reader, config,
      {.num_experts = 512, .experts_per_token = 10, .intermediate_size = 512, .shared_intermediate_size = 512});
  MoeConfig& moe = config.moe;
  moe.normalize_top_k = reader.boolean("norm_topk_prob", true);
  moe.sparse_step = reader.positive_int("decoder_sparse_step", 1);
  moe.layout = ExpertLayout::kPerExpert;
  read_mlp_only_layers(reader, config);
}

}  // namespace

ModelFamily qwen3_next_family() {
  return {.model_type = "qwen3_next",
          .architectures = {"Qwen3NextForCausalLM"},
          .config_defaults = {.num_kv_heads = 2,
                              .head_dim = 256,
                              .max_position_embeddings = 32768,
                              .rms_norm_eps = 1e-6,
                              .rope_theta = 10000.0},
          .qk_norm = true,
          .reads_mlp_bias = false,
          .linear_attention = true,
          .read_family_options = read_qwen3_next};
}

}  // namespace flashq
