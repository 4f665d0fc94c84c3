// Random tiny mixture-of-experts targets for the engine tests: the f32 shapes of
// dflash_test_pair.h as Qwen3-MoE checkpoints, with few small experts so a block of rows routes
// to several of them and some receive none (optionally only some layers sparse), and as gpt-oss
// checkpoints (MXFP4 experts, sinks, sliding layers whose window is shorter than the prompts,
// YaRN over a short original context).
#pragma once

#include "tests/engine/dflash_test_pair.h"

namespace flashq::testing {

struct Qwen3MoeOptions {
  int64_t experts = 8;
  int64_t experts_per_token = 2;
  int64_t sparse_step = 1;
  std::vector<int64_t> dense_layers;
  bool norm_topk_prob = true;
};

inline TinyModelSpec qwen3_moe_f32_target(uint64_t seed, int64_t layers = 3, int64_t hidden = 64, int64_t heads = 4,
                                          int64_t kv_heads = 2, int64_t head_dim = 16, Qwen3MoeOptions options = {}) {
  TinyModelSpec s = f32_target(seed, layers, hidden, heads, kv_heads, head_dim);
  s.family = "qwen3-moe";
  s.experts = options.experts;
  s.experts_per_token = options.experts_per_token;
  s.expert_inter = hidden / 2;
  s.sparse_step = options.sparse_step;
  s.dense_layers = options.dense_layers;
  s.norm_topk_prob = options.norm_topk_prob;
  return s;
}

inline TinyModelSpec gpt_oss_f32_target(uint64_t seed, int64_t layers = 4, int64_t window = 4, int64_t experts = 8,
                                        int64_t experts_per_token = 2) {
  TinyModelSpec s = f32_target(seed, layers, 64, 4, 2, 16);
  s.family = "gpt-oss";
  s.inter = 64;
  s.experts = experts;
  s.experts_per_token = experts_per_token;
  s.sliding_window = window;
  s.rope_theta = 150000;
  s.yarn_factor = 32;
  s.original_max_position = 16;
  return s;
}

}  // namespace flashq::testing
