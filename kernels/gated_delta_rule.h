// What Backend::gated_delta_rule takes (kernels/backend.h): Gated DeltaNet's recurrence, the
// linear attention of the Qwen3.5 / Qwen3-Next layers (docs/models.md), one sequence's rows at a
// time from its recurrent state.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace flashq {

// One sequence's share of a gated_delta_rule call: rows [first_row, first_row + rows) of its
// inputs, run in order from `state`, [value heads, key dim, value dim] float32, which holds the
// state after its last row when the op is done.
struct DeltaRuleChunk {
  Tensor* state = nullptr;
  int64_t first_row = 0, rows = 0;
};

}  // namespace flashq
