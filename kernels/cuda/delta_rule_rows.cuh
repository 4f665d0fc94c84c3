// What both forms of the delta rule's GPU kernels (gated_delta_rule.cu and
// gated_delta_rule_chunked.cu) do to a row first: its q and k, one key head's, L2-normalised by
// the whole block (q also scaled by 1 / sqrt(key_dim)), as the CPU's l2_normalise does.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace flashq::cuda {

// qn and kn [key_dim] (shared memory) = the normalised q_row and k_row; `partials` as
// repeatable_block_sum takes them. Every thread of the block calls it; it syncs before returning
// only inside the sums, so a caller reading qn or kn from other threads syncs first.
__device__ inline void normalise_qk_row(const float* q_row, const float* k_row, int64_t key_dim, float* partials,
                                        float* qn, float* kn) {
  float q_squares = 0.0f, k_squares = 0.0f;
  for (int64_t d = threadIdx.x; d < key_dim; d += blockDim.x) {
    q_squares += q_row[d] * q_row[d];
    k_squares += k_row[d] * k_row[d];
  }
  const float q_factor =
      rsqrtf(static_cast<float>(key_dim)) * rsqrtf(repeatable_block_sum(q_squares, partials) + 1e-6f);
  const float k_factor = rsqrtf(repeatable_block_sum(k_squares, partials) + 1e-6f);
  for (int64_t d = threadIdx.x; d < key_dim; d += blockDim.x) {
    qn[d] = q_row[d] * q_factor;
    kn[d] = k_row[d] * k_factor;
  }
}

}  // namespace flashq::cuda
