// Gated DeltaNet's recurrence in its chunked form on the GPU (twin:
// kernels/cpu/gated_delta_rule_chunked.cpp), as Backend::gated_delta_rule_chunked states. Simple:
// one launch per sequence, a block per value head; per chunk of kDeltaRuleChunkRows rows the
// block normalises the rows' q and k into shared memory and forms their pairwise products, then
// a thread per column of the state (value dim) runs the chunk's triangular solve, outputs and
// state update for its column from registers. Row after row only inside a chunk's solve.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gated_delta_rule.h"

namespace flashq::cuda {

inline constexpr int64_t kDeltaRuleChunkRows = 16;
// The largest key dim the kernel's shared memory holds (two chunks of normalised rows); the
// backend runs a larger one in the recurrent form.
inline constexpr int64_t kDeltaRuleChunkedMaxKeyDim = 256;

// As gated_delta_rule (gated_delta_rule.h), chunk by chunk; key_dim at most
// kDeltaRuleChunkedMaxKeyDim, value_dim at most 1024.
void gated_delta_rule_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                              int64_t rows, DeltaRuleShape s, float* state, float* out, cudaStream_t stream);

}  // namespace flashq::cuda
