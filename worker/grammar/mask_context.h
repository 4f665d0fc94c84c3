// The cache key of a set of stacks: the positions of each one's top kMaskContextFrames frames.
#pragma once

#include <algorithm>
#include <array>

#include "worker/grammar/byte_stepper.h"
#include "worker/grammar/token_mask_cache.h"

namespace flashq::grammar {

inline MaskContext mask_context_of(const StackPool& pool, const StackSet& stacks) {
  std::vector<std::array<int32_t, kMaskContextFrames>> frames;
  for (int32_t stack : stacks) {
    if (stack < 0) continue;  // a finished parse takes no bytes
    std::array<int32_t, kMaskContextFrames> top;
    top.fill(-1);
    for (int i = 0; i < kMaskContextFrames && stack >= 0; ++i) {
      top[i] = pool.node(stack).position;
      stack = pool.node(stack).below;
    }
    frames.push_back(top);
  }
  std::sort(frames.begin(), frames.end());
  frames.erase(std::unique(frames.begin(), frames.end()), frames.end());
  MaskContext context;
  for (const auto& top : frames) context.positions.insert(context.positions.end(), top.begin(), top.end());
  return context;
}

}  // namespace flashq::grammar
