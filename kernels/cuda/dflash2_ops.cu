#include <cfloat>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dflash2_ops.h"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr unsigned kThreads = 256;

__global__ void conv_rows(const float* __restrict__ x, const float* __restrict__ dynamic, const void* base,
                          DType base_dtype, const int32_t* __restrict__ row_in_block, int64_t rows, int64_t channels,
                          int64_t taps, int64_t group_size, float* __restrict__ out) {
  begin_after_previous_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * channels) return;
  const int64_t t = i / channels, c = i % channels, groups = channels / group_size;
  const int64_t reach = min(taps - 1, static_cast<int64_t>(max(row_in_block[t], 0)));
  float sum = 0.0f;
  for (int64_t o = 0; o <= reach; ++o) {
    const float weight =
        weight_at(base, base_dtype, o * channels + c) + dynamic[t * taps * groups + o * groups + c / group_size];
    sum = fmaf(weight, x[(t - o) * channels + c], sum);
  }
  out[i] = sum;
}

// Whether (va, a) comes before (vb, b): larger value first, then the lower index.
__device__ bool ranks_before(float va, int32_t a, float vb, int32_t b) { return va > vb || (va == vb && a < b); }

__device__ float rank_value(float v) { return isnan(v) ? -INFINITY : v; }

// One block a row: k rounds, each the best entry ranking after the previous round's.
__global__ void top_k_rows(const float* __restrict__ logits, int64_t vocab, int64_t k, float* __restrict__ values,
                           int32_t* __restrict__ ids) {
  __shared__ float best_value[kThreads];
  __shared__ int32_t best_id[kThreads];
  begin_after_previous_grid();
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float last_value = INFINITY;
  int32_t last_id = -1;
  for (int64_t j = 0; j < k; ++j) {
    float value = -INFINITY;
    int32_t id = -1;
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float x = rank_value(row[v]);
      const auto index = static_cast<int32_t>(v);
      if (!ranks_before(last_value, last_id, x, index) && last_id >= 0) continue;  // taken already
      if (id < 0 || ranks_before(x, index, value, id)) value = x, id = index;
    }
    best_value[threadIdx.x] = value;
    best_id[threadIdx.x] = id;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        const float other_value = best_value[threadIdx.x + half];
        const int32_t other_id = best_id[threadIdx.x + half];
        if (other_id >= 0 && (best_id[threadIdx.x] < 0 ||
                              ranks_before(other_value, other_id, best_value[threadIdx.x], best_id[threadIdx.x]))) {
          best_value[threadIdx.x] = other_value;
          best_id[threadIdx.x] = other_id;
        }
      }
      __syncthreads();
    }
    last_value = best_value[0];
    last_id = best_id[0];
    if (threadIdx.x == 0) {
      values[blockIdx.x * k + j] = last_value;
      ids[blockIdx.x * k + j] = last_id;
    }
    __syncthreads();  // best_*[0] read by every thread before the next round writes it
  }
}

__global__ void pair_scores(const float* __restrict__ a, const float* __restrict__ h, const float* __restrict__ b,
                            int64_t rows, int64_t k, int64_t rank, float* __restrict__ out) {
  begin_after_previous_grid();
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= rows * k * k) return;
  const int64_t i = n / (k * k), p = n / k % k, q = n % k;
  const float* ap = a + (i * k + p) * rank;
  const float* bq = b + (i * k + q) * rank;
  float sum = 0.0f;
  for (int64_t r = 0; r < rank; ++r) sum = fmaf(ap[r] * h[i * rank + r], bq[r], sum);
  out[n] = sum;
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void grouped_dynamic_conv(const float* x, const float* dynamic, const void* base, DType base_dtype,
                          const int32_t* row_in_block, int64_t rows, int64_t channels, int64_t taps, int64_t group_size,
                          float* out, cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel("grouped_dynamic_conv", conv_rows, blocks_for(rows * channels), kThreads, 0, stream, x, dynamic, base,
                base_dtype, row_in_block, rows, channels, taps, group_size, out);
}

void top_k(const float* logits, int64_t rows, int64_t vocab, int64_t k, float* values, int32_t* ids,
           cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel("top_k", top_k_rows, static_cast<unsigned>(rows), kThreads, 0, stream, logits, vocab, k, values, ids);
}

void selector_pair_scores(const float* a, const float* h, const float* b, int64_t rows, int64_t k, int64_t rank,
                          float* out, cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel("selector_pair_scores", pair_scores, blocks_for(rows * k * k), kThreads, 0, stream, a, h, b, rows, k,
                rank, out);
}

}  // namespace flashq::cuda
