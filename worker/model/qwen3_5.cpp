#include "worker/model/qwen3_5.h"

#include "worker/model/hybrid_options.h"

namespace flashq {
namespace {

void read_qwen3_5(const ConfigReader& reader, ModelConfig& config) {
  read_hybrid_options(reader, config, /*grouped_projection=*/false);
}

}  // namespace

ModelFamily qwen3_5_family() {
  return {.model_type = "qwen3_5",
          .model_type_aliases = {"qwen3_5_text"},
          .architectures = {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"},
          .config_defaults = {.num_kv_heads = 4,
                              .head_dim = 256,
                              .max_position_embeddings = 32768,
                              .rms_norm_eps = 1e-6,
                              .rope_theta = 10000.0},
          .qk_norm = true,
          .reads_mlp_bias = false,
          .linear_attention = true,
          .read_family_options = read_qwen3_5};
}

}  // namespace flashq
