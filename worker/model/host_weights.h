// Rearrangements of a checkpoint's tensors on the host, before they are uploaded, for families
// whose stored layout is not the one the backend ops read (docs/models.md): rows regrouped (a
// fused projection split into its parts, rows grouped per head gathered per part) and norm
// weights stored around 0 turned into the scale 1 + w.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/tensor.h"

namespace flashq {

// Rows [first, first + count) of a tensor's first dimension.
struct RowRun {
  int64_t first = 0, count = 0;
};

// A host tensor of `host`'s dtype holding the runs' rows one after another (`host`'s other
// dimensions kept).
Tensor gather_host_rows(const Tensor& host, std::span<const RowRun> runs);

// The runs of every group's part: `groups` groups of `group_rows` rows each, and of each group
// the rows [offset, offset + count).
std::vector<RowRun> rows_of_each_group(int64_t groups, int64_t group_rows, int64_t offset, int64_t count);

// A float32 host tensor of 1 + w for a norm weight `host` (f32, f16 or bf16) stored around 0:
// float32, so the 1 keeps w's precision.
Tensor one_plus_weight(const Tensor& host);

}  // namespace flashq
