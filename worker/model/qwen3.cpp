#include "worker/model/qwen3.h"

namespace flashq {

ModelFamily qwen3_family() {
  return {.model_type = "qwen3",
          .architectures = {"Qwen3ForCausalLM"},
          // Qwen3Config's: an absent head_dim is 128, never hidden_size / heads.
          .config_defaults = {.num_kv_heads = 32,
                              .head_dim = 128,
                              .max_position_embeddings = 32768,
                              .rms_norm_eps = 1e-6,
                              .rope_theta = 10000.0},
          .qk_norm = true,
          .reads_mlp_bias = false};
}

}  // namespace flashq
