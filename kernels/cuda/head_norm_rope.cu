#include "kernels/cuda/head_norm_rope.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace flashq::cuda {
namespace {

constexpr int kMaxThreads = 256;

// One block per (row, head): normalise the head into shared memory, then rotate its pairs.
__global__ void head_norm_rope_kernel(float* x, const void* __restrict__ w, DType w_dtype, float eps,
                                      const int32_t* __restrict__ positions, float theta, int64_t heads,
                                      int64_t head_dim) {
  extern __shared__ float normed[];  // head_dim floats
  __shared__ float scratch[kWarpSize];
  float* v = x + static_cast<int64_t>(blockIdx.x) * head_dim;
  const int64_t row = static_cast<int64_t>(blockIdx.x) / heads;
  float sum_squares = 0.0f;
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) sum_squares = fmaf(v[i], v[i], sum_squares);
  const float total = block_sum(sum_squares, scratch);
  const float scale = 1.0f / sqrtf(total / static_cast<float>(head_dim) + eps);
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) normed[i] = v[i] * scale * weight_at(w, w_dtype, i);
  __syncthreads();
  const int64_t half = head_dim / 2;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const double inv_freq =
        pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const float angle = static_cast<float>(positions[row] * static_cast<double>(static_cast<float>(inv_freq)));
    float sin_a, cos_a;
    sincosf(angle, &sin_a, &cos_a);
    const float a = normed[i], b = normed[i + half];
    v[i] = a * cos_a - b * sin_a;
    v[i + half] = b * cos_a + a * sin_a;
  }
  if (head_dim % 2 == 1 && threadIdx.x == 0) v[head_dim - 1] = normed[head_dim - 1];  // no pair: as rope leaves it
}

}  // namespace

void head_norm_rope(float* x, const void* w, DType w_dtype, float eps, const int32_t* positions, float theta,
                    int64_t rows, int64_t heads, int64_t head_dim, cudaStream_t stream) {
  if (rows == 0 || heads == 0 || head_dim == 0) return;
  const int64_t rounded = (head_dim + kWarpSize - 1) / kWarpSize * kWarpSize;
  const auto threads = static_cast<unsigned>(std::clamp<int64_t>(rounded, kWarpSize, kMaxThreads));
  const size_t shared = static_cast<size_t>(head_dim) * sizeof(float);
  head_norm_rope_kernel<<<static_cast<unsigned>(rows * heads), threads, shared, stream>>>(
      x, w, w_dtype, eps, positions, theta, heads, head_dim);
  check_launch("head_norm_rope");
}

}  // namespace flashq::cuda
