#include "kernels/cuda/gated_delta_rule.h"
#include "kernels/cuda/delta_rule_rows.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr int kMaxThreads = 1024;

// Block h: value head h. Shared: the row's normalised q and k (key_dim each) and the partials.
__global__ void delta_rule_rows(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                const float* __restrict__ g, const float* __restrict__ beta, int64_t rows,
                                DeltaRuleShape s, float* __restrict__ state, float* __restrict__ out) {
  extern __shared__ float shared[];
  float* qn = shared;
  float* kn = qn + s.key_dim;
  float* partials = kn + s.key_dim;
  begin_after_previous_grid();
  const int64_t h = blockIdx.x, j = threadIdx.x;
  const int64_t key_head = h / (s.value_heads / s.key_heads);
  float* head_state = state + h * s.key_dim * s.value_dim;
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t row = (t * s.key_heads + key_head) * s.key_dim;
    normalise_qk_row(q + row, k + row, s.key_dim, partials, qn, kn);
    __syncthreads();
    if (j < s.value_dim) {
      const int64_t at = t * s.value_heads + h;
      const float decay = expf(g[at]);
      float kv = 0.0f;
      for (int64_t i = 0; i < s.key_dim; ++i) {
        const float decayed = head_state[i * s.value_dim + j] * decay;
        head_state[i * s.value_dim + j] = decayed;
        kv = fmaf(decayed, kn[i], kv);
      }
      const float u = beta[at] * (v[at * s.value_dim + j] - kv);
      float o = 0.0f;
      for (int64_t i = 0; i < s.key_dim; ++i) {
        const float updated = fmaf(kn[i], u, head_state[i * s.value_dim + j]);
        head_state[i * s.value_dim + j] = updated;
        o = fmaf(updated, qn[i], o);
      }
      out[at * s.value_dim + j] = o;
    }
    __syncthreads();  // qn and kn are rewritten by the next row
  }
}

}  // namespace

void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t rows,
                      DeltaRuleShape s, float* state, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  // A power of two (the reduction halves it) covering the value dim.
  unsigned threads = 32;
  while (threads < s.value_dim && threads < kMaxThreads) threads *= 2;
  const size_t shared_bytes = (2 * static_cast<size_t>(s.key_dim) + threads) * sizeof(float);
  launch_kernel("gated_delta_rule", delta_rule_rows, static_cast<unsigned>(s.value_heads), threads, shared_bytes,
                stream, q, k, v, g, beta, rows, s, state, out);
}

}  // namespace flashq::cuda
