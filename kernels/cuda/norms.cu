#include "kernels/cuda/norms.h"

#include <algorithm>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr int kMaxThreads = 256;

// When kAddDelta, `x` is the residual h and receives h + delta first. Each thread reads back
// only the elements it wrote itself, so no barrier is needed between the two passes.
template <bool kAddDelta>
__global__ void normalize_rows(float* x, const float* __restrict__ delta, const void* __restrict__ w, DType w_dtype,
                               float eps, float* y, int64_t dim) {
  __shared__ float scratch[kWarpSize];
  begin_after_previous_grid();
  float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float sum_squares = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if constexpr (kAddDelta) {
      v += delta[static_cast<int64_t>(blockIdx.x) * dim + i];
      xr[i] = v;
    }
    sum_squares = fmaf(v, v, sum_squares);
  }
  const float total = block_sum(sum_squares, scratch);
  const float scale = 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale * weight_at(w, w_dtype, i);
}

unsigned threads_for(int64_t dim) {
  const int64_t rounded = (dim + kWarpSize - 1) / kWarpSize * kWarpSize;
  return static_cast<unsigned>(std::clamp<int64_t>(rounded, kWarpSize, kMaxThreads));
}

}  // namespace

void rmsnorm(const float* x, const void* w, DType w_dtype, float eps, float* y, int64_t rows, int64_t dim,
             cudaStream_t stream) {
  if (rows == 0 || dim == 0) return;
  // x is only read when kAddDelta is false; the kernel's pointer is non-const for the fused form.
  launch_kernel("rmsnorm", normalize_rows<false>, static_cast<unsigned>(rows), threads_for(dim), 0, stream,
                const_cast<float*>(x), nullptr, w, w_dtype, eps, y, dim);
}

void add_rmsnorm(float* h, const float* delta, const void* w, DType w_dtype, float eps, float* y, int64_t rows,
                 int64_t dim, cudaStream_t stream) {
  if (rows == 0 || dim == 0) return;
  launch_kernel("add_rmsnorm", normalize_rows<true>, static_cast<unsigned>(rows), threads_for(dim), 0, stream, h, delta,
                w, w_dtype, eps, y, dim);
}

}  // namespace flashq::cuda
