#include "kernels/cuda/head_norm_rope.h"

#include <algorithm>

#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/head_norm_rope.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr int kMaxThreads = 256;

// One block per (row, head).
__global__ void head_norm_rope_kernel(float* x, const void* __restrict__ w, DType w_dtype, float eps,
                                      const int32_t* __restrict__ positions, RopeOptions rope, int64_t heads,
                                      int64_t head_dim) {
  extern __shared__ float normed[];  // head_dim floats
  __shared__ float scratch[kWarpSize];
  begin_after_previous_grid();
  float* head = x + static_cast<int64_t>(blockIdx.x) * head_dim;
  const int64_t row = static_cast<int64_t>(blockIdx.x) / heads;
  norm_rope_head<float>(head, head, nullptr, w, w_dtype, eps, positions[row], rope, head_dim, normed, scratch);
}

}  // namespace

void head_norm_rope(float* x, const void* w, DType w_dtype, float eps, const int32_t* positions, const RopeOptions& rope,
                    int64_t rows, int64_t heads, int64_t head_dim, cudaStream_t stream) {
  if (rows == 0 || heads == 0 || head_dim == 0) return;
  const int64_t rounded = (head_dim + kWarpSize - 1) / kWarpSize * kWarpSize;
  const auto threads = static_cast<unsigned>(std::clamp<int64_t>(rounded, kWarpSize, kMaxThreads));
  const size_t shared = static_cast<size_t>(head_dim) * sizeof(float);
  launch_kernel("head_norm_rope", head_norm_rope_kernel, static_cast<unsigned>(rows * heads), threads, shared, stream,
                x, w, w_dtype, eps, positions, rope, heads, head_dim);
}

}  // namespace flashq::cuda
