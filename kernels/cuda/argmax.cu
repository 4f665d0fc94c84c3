#include "kernels/cuda/argmax.h"

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace flashq::cuda {
namespace {

constexpr int kThreads = 256;

struct Candidate {
  float value;
  int64_t index;
};

// a beats b: larger, or as large and earlier.
__device__ inline bool beats(Candidate a, Candidate b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ inline Candidate better(Candidate a, Candidate b) { return beats(b, a) ? b : a; }

// One block per row: each thread scans a stride, then a tree over the block.
__global__ void __launch_bounds__(kThreads) argmax_rows(const float* __restrict__ logits, int32_t* __restrict__ ids,
                                                        int64_t vocab) {
  __shared__ float values[kThreads];
  __shared__ int64_t indices[kThreads];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  Candidate best{-INFINITY, vocab};
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    best = better(best, Candidate{isnan(v) ? -INFINITY : v, i});
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
  argmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, ids, vocab);
  check_launch("argmax");
}

}  // namespace flashq::cuda
