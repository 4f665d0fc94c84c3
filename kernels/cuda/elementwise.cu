#include "kernels/cuda/elementwise.h"

#include <algorithm>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 65535));
}

__global__ void add_in_place(float* h, const float* delta, int64_t count) {
  begin_after_previous_grid();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    h[i] += delta[i];
  }
}

__global__ void swiglu_elements(const float* gate, const float* up, float* out, int64_t count) {
  begin_after_previous_grid();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = silu_times(gate[i], up[i]);
  }
}

}  // namespace

void add(float* h, const float* delta, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  launch_kernel("add", add_in_place, blocks_for(count), kThreads, 0, stream, h, delta, count);
}

void swiglu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  launch_kernel("swiglu", swiglu_elements, blocks_for(count), kThreads, 0, stream, gate, up, out, count);
}

}  // namespace flashq::cuda
