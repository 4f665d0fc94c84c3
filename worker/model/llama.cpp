#include "worker/model/llama.h"

namespace flashq {

ModelFamily llama_family() {
  return {.model_type = "llama",
          .architectures = {"LlamaForCausalLM"},
          // LlamaConfig's: an absent num_key_value_heads is num_attention_heads and an absent
          // head_dim hidden_size / num_attention_heads (both 0: derived); Llama 3 checkpoints name
          // their rope_theta (500000).
          .config_defaults = {.num_kv_heads = 0,
                              .head_dim = 0,
                              .max_position_embeddings = 2048,
                              .rms_norm_eps = 1e-6,
                              .rope_theta = 10000.0},
          .qk_norm = false,
          .reads_mlp_bias = true};
}

}  // namespace flashq
