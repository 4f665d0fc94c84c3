#include <cuda_bf16.h>

#include "kernels/cuda/causal_conv1d.h"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr unsigned kThreads = 256;

__device__ float weight_at(const void* weight, bool bf16, int64_t i) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(weight)[i]) : static_cast<const float*>(weight)[i];
}

// Input p of channel c, p counted from the first state row (rows before the chunk first).
__device__ float input_at(const float* x, const float* state, int64_t history, int64_t channels, int64_t p,
                          int64_t c) {
  return p < history ? state[p * channels + c] : x[(p - history) * channels + c];
}

__global__ void conv_rows(const float* __restrict__ x, const void* __restrict__ weight, bool bf16, int64_t rows,
                          int64_t channels, int64_t kernel, float* __restrict__ state, float* __restrict__ out) {
  begin_after_previous_grid();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int64_t history = kernel - 1;
  for (int64_t t = 0; t < rows; ++t) {
    float sum = 0.0f;
    for (int64_t j = 0; j < kernel; ++j) {
      sum = fmaf(weight_at(weight, bf16, c * kernel + j), input_at(x, state, history, channels, t + j, c), sum);
    }
    out[t * channels + c] = sum / (1.0f + expf(-sum));  // SiLU
  }
  // The last `history` inputs, oldest first; each read before it is overwritten (p >= j).
  for (int64_t j = 0; j < history; ++j) state[j * channels + c] = input_at(x, state, history, channels, rows + j, c);
}

}  // namespace

void causal_conv1d(const float* x, const void* weight, DType weight_dtype, int64_t rows, int64_t channels,
                   int64_t kernel, float* state, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  const auto blocks = static_cast<unsigned>((channels + kThreads - 1) / kThreads);
  launch_kernel("causal_conv1d", conv_rows, blocks, kThreads, 0, stream, x, weight, weight_dtype == DType::kBF16, rows,
                channels, kernel, state, out);
}

}  // namespace flashq::cuda
