#include "kernels/cuda/elementwise.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace flashq::cuda {
namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 65535));
}

__global__ void add_in_place(float* h, const float* delta, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    h[i] += delta[i];
  }
}

__global__ void swiglu_elements(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = silu_times(gate[i], up[i]);
  }
}

}  // namespace

void add(float* h, const float* delta, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  add_in_place<<<blocks_for(count), kThreads, 0, stream>>>(h, delta, count);
  check_launch("add");
}

void swiglu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  swiglu_elements<<<blocks_for(count), kThreads, 0, stream>>>(gate, up, out, count);
  check_launch("swiglu");
}

}  // namespace flashq::cuda
