#include <cuda_bf16.h>

#include "kernels/cuda/deltanet_gates.h"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr unsigned kThreads = 256;

__device__ float weight_at(const void* w, bool bf16, int64_t i) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]) : static_cast<const float*>(w)[i];
}

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void gates(const float* __restrict__ a, const float* __restrict__ b, const void* a_log, bool a_log_bf16,
                      const void* dt_bias, bool dt_bias_bf16, int64_t count, int64_t heads, float* __restrict__ g,
                      float* __restrict__ beta) {
  begin_after_previous_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int64_t h = i % heads;
  const float x = a[i] + weight_at(dt_bias, dt_bias_bf16, h);
  const float softplus = x > 20.0f ? x : log1pf(expf(x));  // torch's threshold
  beta[i] = sigmoid(b[i]);
  g[i] = -expf(weight_at(a_log, a_log_bf16, h)) * softplus;
}

// A thread per vector: its sum of squares in order, then its elements.
__global__ void norm_gated(const float* __restrict__ x, const float* __restrict__ z, const void* w, bool bf16,
                           float eps, int64_t vectors, int64_t dim, float* out) {
  begin_after_previous_grid();
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= vectors) return;
  const float* xn = x + n * dim;
  const float* zn = z + n * dim;
  double squares = 0.0;
  for (int64_t d = 0; d < dim; ++d) squares += static_cast<double>(xn[d]) * xn[d];
  const auto inverse = static_cast<float>(1.0 / sqrt(squares / static_cast<double>(dim) + eps));
  for (int64_t d = 0; d < dim; ++d) out[n * dim + d] = xn[d] * inverse * weight_at(w, bf16, d) * (zn[d] * sigmoid(zn[d]));
}

__global__ void gate_by_sigmoid(float* x, const float* __restrict__ gate, int64_t count, int64_t per_gate) {
  begin_after_previous_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] *= sigmoid(gate[i / per_gate]);
}

unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

}  // namespace

void delta_rule_gates(const float* a, const float* b, const void* a_log, DType a_log_dtype, const void* dt_bias,
                      DType dt_bias_dtype, int64_t rows, int64_t heads, float* g, float* beta, cudaStream_t stream) {
  const int64_t count = rows * heads;
  if (count == 0) return;
  launch_kernel("delta_rule_gates", gates, blocks_for(count), kThreads, 0, stream, a, b, a_log,
                a_log_dtype == DType::kBF16, dt_bias, dt_bias_dtype == DType::kBF16, count, heads, g, beta);
}

void gated_rmsnorm(const float* x, const float* z, const void* w, DType w_dtype, float eps, int64_t vectors,
                   int64_t dim, float* out, cudaStream_t stream) {
  if (vectors == 0) return;
  launch_kernel("gated_rmsnorm", norm_gated, blocks_for(vectors), kThreads, 0, stream, x, z, w,
                w_dtype == DType::kBF16, eps, vectors, dim, out);
}

void sigmoid_gate(float* x, const float* gate, int64_t count, int64_t per_gate, cudaStream_t stream) {
  if (count == 0) return;
  launch_kernel("sigmoid_gate", gate_by_sigmoid, blocks_for(count), kThreads, 0, stream, x, gate, count, per_gate);
}

}  // namespace flashq::cuda
