// Random tiny hybrid targets for the engine tests (Qwen3.5, Qwen3.5-MoE, Qwen3-Next; make-tiny's
// layouts): the f32 shapes of dflash_test_pair.h with three Gated DeltaNet layers to each
// attention layer, small linear heads, and for the MoE families few small experts beside the
// shared expert.
#pragma once

#include <string>

#include "tests/engine/dflash_test_pair.h"

namespace flashq::testing {

inline TinyModelSpec hybrid_f32_target(const std::string& family, uint64_t seed, int64_t layers = 4,
                                       bool multimodal = false) {
  TinyModelSpec s = f32_target(seed, layers, 64, 4, 2, 16);
  s.family = family;
  s.linear_key_heads = 2, s.linear_value_heads = 4, s.linear_key_dim = 16, s.linear_value_dim = 16;
  s.experts = 6, s.experts_per_token = 2, s.expert_inter = 32, s.shared_expert_inter = 32;
  s.multimodal = multimodal;
  return s;
}

}  // namespace flashq::testing
