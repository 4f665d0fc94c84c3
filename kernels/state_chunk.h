// One sequence's share of an op over recurrent state (Backend::gated_delta_rule,
// causal_conv1d; kernels/backend.h): the Gated DeltaNet layers of Qwen3.5 / Qwen3-Next
// (docs/models.md) carry per sequence a state their rows update in order.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace flashq {

// Rows [first_row, first_row + rows) of the op's inputs, run in order from `state` (float32, of
// the op's shape), which holds the state after the last row when the op is done.
struct StateChunk {
  Tensor* state = nullptr;
  int64_t first_row = 0, rows = 0;
};

}  // namespace flashq
