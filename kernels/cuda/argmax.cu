#include "kernels/cuda/argmax.h"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

// One block takes a whole row (a decode step has one): as many threads as a block may have, so
// that 128 KB of the row are in flight at once.
constexpr int kThreads = 1024;

struct Candidate {
  float value;
  int64_t index;
};

// a beats b: larger, or as large and earlier.
__device__ inline bool beats(Candidate a, Candidate b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ inline Candidate better(Candidate a, Candidate b) { return beats(b, a) ? b : a; }

__device__ inline void consider(Candidate& best, float value, int64_t index) {
  best = better(best, Candidate{isnan(value) ? -INFINITY : value, index});
}

// 16-byte loads a thread has in flight: one block reads a whole row (600 KB for Qwen3's
// vocabulary), which a chain of one 4-byte load at a time made latency-bound.
constexpr int kLoadsInFlight = 8;

// One block per row: each thread scans a stride (in float4s when `by_four`: vocab a multiple of
// 4 and the logits 16-byte aligned), then a tree over the block. The winner is the largest
// value at the lowest index whatever the order of the scan.
__global__ void __launch_bounds__(kThreads) argmax_rows(const float* __restrict__ logits, int32_t* __restrict__ ids,
                                                        int64_t vocab, bool by_four) {
  __shared__ float values[kThreads];
  __shared__ int64_t indices[kThreads];
  begin_after_previous_grid();
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  Candidate best{-INFINITY, vocab};
  if (by_four) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int64_t fours = vocab / 4;
    for (int64_t first = threadIdx.x; first < fours; first += static_cast<int64_t>(kThreads) * kLoadsInFlight) {
      float4 v[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        v[u] = i < fours ? row4[i] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      }
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int64_t i = 4 * (first + static_cast<int64_t>(u) * kThreads);
        if (i >= vocab) break;
        consider(best, v[u].x, i);
        consider(best, v[u].y, i + 1);
        consider(best, v[u].z, i + 2);
        consider(best, v[u].w, i + 3);
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) consider(best, row[i], i);
  }
  values[threadIdx.x] = best.value;
  indices[threadIdx.x] = best.index;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) {
      const Candidate other{values[threadIdx.x + stride], indices[threadIdx.x + stride]};
      const Candidate mine = better(Candidate{values[threadIdx.x], indices[threadIdx.x]}, other);
      values[threadIdx.x] = mine.value;
      indices[threadIdx.x] = mine.index;
    }
    __syncthreads();
  }
  // Only an empty row keeps the sentinel index `vocab`; answer 0 there, as the CPU does.
  if (threadIdx.x == 0) ids[blockIdx.x] = static_cast<int32_t>(indices[0] < vocab ? indices[0] : 0);
}

}  // namespace

void argmax(const float* logits, int32_t* ids, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows == 0) return;
  const bool by_four = vocab % 4 == 0 && aligned16(logits);
  launch_kernel("argmax", argmax_rows, static_cast<unsigned>(rows), kThreads, 0, stream, logits, ids, vocab, by_four);
}

}  // namespace flashq::cuda
