#include <algorithm>

#include "kernels/cuda/bias.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr unsigned kThreads = 256;

// One thread per element, grid-stride.
__global__ void add_bias_elements(float* y, const void* __restrict__ bias, DType bias_dtype, int64_t rows,
                                  int64_t cols) {
  begin_after_previous_grid();
  const int64_t count = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += weight_at(bias, bias_dtype, i % cols);
  }
}

}  // namespace

void add_bias(float* y, const void* bias, DType bias_dtype, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t count = rows * cols;
  if (count == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 65535));
  launch_kernel("add_bias", add_bias_elements, blocks, kThreads, 0, stream, y, bias, bias_dtype, rows, cols);
}

}  // namespace flashq::cuda
