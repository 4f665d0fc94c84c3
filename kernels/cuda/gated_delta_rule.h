// Gated DeltaNet's recurrence on the GPU (twin: kernels/cpu/gated_delta_rule.cpp), as
// Backend::gated_delta_rule states. Simple: one launch per sequence, a block per value head, a
// thread per column of the state (value dim), which it alone reads and writes; rows in order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashq::cuda {

struct DeltaRuleShape {
  int64_t key_heads, value_heads, key_dim, value_dim;
};

// One sequence's `rows` rows (q, k, v, g, beta, out already at its first row) from `state`
// [value_heads, key_dim, value_dim], updated in place. key_dim and value_dim at most 1024.
void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t rows,
                      DeltaRuleShape s, float* state, float* out, cudaStream_t stream);

}  // namespace flashq::cuda
