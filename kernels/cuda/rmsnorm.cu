#include "kernels/cuda/rmsnorm.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr int kLoopMaxThreads = 256;

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

// Rows of a multiple of 4 floats, 16-byte aligned, up to kMostFours * 4 floats: a thread takes
// up to kFoursPerThread float4s of the row, issues all its loads at once and keeps the values in
// registers for the scaling. The loop above reads a row twice, a few 4-byte loads in flight a
// thread, so a row costs several round trips to memory; a decode step runs two of these norms a
// layer on one row, one block, where nothing hides that latency. The sum's order depends on dim
// alone, so a row's result does not depend on the rows beside it.
constexpr int kFoursPerThread = 4;
constexpr int kMostThreads = 1024;
constexpr int64_t kMostFours = int64_t{kFoursPerThread} * kMostThreads;

__device__ inline float sum_of_squares(float4 v, float sum) {
  return fmaf(v.w, v.w, fmaf(v.z, v.z, fmaf(v.y, v.y, fmaf(v.x, v.x, sum))));
}

template <bool kAddDelta>
__global__ void __launch_bounds__(kMostThreads)
    normalize_rows_by_four(float* x, const float* __restrict__ delta, const void* __restrict__ w, DType w_dtype,
                           float eps, float* y, int64_t dim) {
  __shared__ float scratch[kWarpSize];
  begin_after_previous_grid();
  const int64_t fours = dim / 4, row = blockIdx.x;
  auto* xr = reinterpret_cast<float4*>(x + row * dim);
  auto* yr = reinterpret_cast<float4*>(y + row * dim);
  float4 v[kFoursPerThread], d[kFoursPerThread];
#pragma unroll
  for (int u = 0; u < kFoursPerThread; ++u) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i >= fours) break;
    v[u] = xr[i];
    if constexpr (kAddDelta) d[u] = reinterpret_cast<const float4*>(delta + row * dim)[i];
  }
  float sum_squares = 0.0f;
#pragma unroll
  for (int u = 0; u < kFoursPerThread; ++u) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i >= fours) break;
    if constexpr (kAddDelta) {
      v[u] = make_float4(v[u].x + d[u].x, v[u].y + d[u].y, v[u].z + d[u].z, v[u].w + d[u].w);
      xr[i] = v[u];
    }
    sum_squares = sum_of_squares(v[u], sum_squares);
  }
  const float total = block_sum(sum_squares, scratch);
  const float scale = 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
#pragma unroll
  for (int u = 0; u < kFoursPerThread; ++u) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i >= fours) break;
    yr[i] = make_float4(v[u].x * scale * weight_at(w, w_dtype, 4 * i), v[u].y * scale * weight_at(w, w_dtype, 4 * i + 1),
                        v[u].z * scale * weight_at(w, w_dtype, 4 * i + 2),
                        v[u].w * scale * weight_at(w, w_dtype, 4 * i + 3));
  }
}

bool by_four(const float* x, const float* delta, const float* y, int64_t dim) {
  return dim % 4 == 0 && dim / 4 <= kMostFours && aligned16(x) && aligned16(y) && (delta == nullptr || aligned16(delta));
}

// A warp's multiple, enough for kFoursPerThread float4s a thread.
unsigned threads_by_four(int64_t dim) {
  const int64_t threads = (dim / 4 + kFoursPerThread - 1) / kFoursPerThread;
  return static_cast<unsigned>(std::clamp<int64_t>((threads + kWarpSize - 1) / kWarpSize * kWarpSize, kWarpSize,
                                                   kMostThreads));
}

unsigned threads_for(int64_t dim) {
  const int64_t rounded = (dim + kWarpSize - 1) / kWarpSize * kWarpSize;
  return static_cast<unsigned>(std::clamp<int64_t>(rounded, kWarpSize, kLoopMaxThreads));
}

}  // namespace

void rmsnorm(const float* x, const void* w, DType w_dtype, float eps, float* y, int64_t rows, int64_t dim,
             cudaStream_t stream) {
  if (rows == 0 || dim == 0) return;
  // x is only read when kAddDelta is false; the kernel's pointer is non-const for the fused form.
  if (by_four(x, nullptr, y, dim)) {
    return launch_kernel("rmsnorm", normalize_rows_by_four<false>, static_cast<unsigned>(rows), threads_by_four(dim), 0,
                         stream, const_cast<float*>(x), nullptr, w, w_dtype, eps, y, dim);
  }
  launch_kernel("rmsnorm", normalize_rows<false>, static_cast<unsigned>(rows), threads_for(dim), 0, stream,
                const_cast<float*>(x), nullptr, w, w_dtype, eps, y, dim);
}

void add_rmsnorm(float* h, const float* delta, const void* w, DType w_dtype, float eps, float* y, int64_t rows,
                 int64_t dim, cudaStream_t stream) {
  if (rows == 0 || dim == 0) return;
  if (by_four(h, delta, y, dim)) {
    return launch_kernel("add_rmsnorm", normalize_rows_by_four<true>, static_cast<unsigned>(rows), threads_by_four(dim),
                         0, stream, h, delta, w, w_dtype, eps, y, dim);
  }
  launch_kernel("add_rmsnorm", normalize_rows<true>, static_cast<unsigned>(rows), threads_for(dim), 0, stream, h, delta,
                w, w_dtype, eps, y, dim);
}

}  // namespace flashq::cuda
