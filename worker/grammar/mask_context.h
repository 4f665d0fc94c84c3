// The cache key of a stack: the positions of its top kMaskContextFrames frames.
#pragma once

#include "worker/grammar/stack_pool.h"
#include "worker/grammar/token_mask_cache.h"

namespace flashq::grammar {

inline MaskContext mask_context_of(const StackPool& pool, int32_t stack) {
  MaskContext context;
  context.positions.fill(-1);
  for (int i = 0; i < kMaskContextFrames && stack >= 0; ++i) {
    context.positions[i] = pool.node(stack).position;
    stack = pool.node(stack).below;
  }
  return context;
}

}  // namespace flashq::grammar
