// Random tiny Llama targets for the engine tests: the f32 shapes of dflash_test_pair.h with the
// Llama family's options (attention and MLP biases, Llama 3 RoPE scaling). The original context
// of the scaling is short (32) so that it changes the rotations at test lengths: with theta
// 500000 and head_dim 16 only the fastest pair is kept, the next is blended, the rest divided.
#pragma once

#include "tests/engine/dflash_test_pair.h"

namespace flashq::testing {

struct LlamaOptions {
  bool biases = true;  // attention (q/k/v/o) and MLP (gate/up/down) biases
  bool llama3_rope = true;
};

inline TinyModelSpec llama_f32_target(uint64_t seed, int64_t layers = 3, int64_t hidden = 64, int64_t heads = 4,
                                      int64_t kv_heads = 2, int64_t head_dim = 16, LlamaOptions options = {}) {
  TinyModelSpec s = f32_target(seed, layers, hidden, heads, kv_heads, head_dim);
  s.family = "llama";
  s.attention_bias = options.biases;
  s.mlp_bias = options.biases;
  s.rope_theta = 5e5;
  if (options.llama3_rope) {
    s.rope_scaling_factor = 8;
    s.low_freq_factor = 1;
    s.high_freq_factor = 4;
    s.original_max_position = 32;
  }
  return s;
}

}  // namespace flashq::testing
