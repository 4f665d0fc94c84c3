#include "kernels/cuda/delta_rule_rows.cuh"
#include "kernels/cuda/gated_delta_rule_chunked.h"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr int kMaxThreads = 1024;
constexpr int C = static_cast<int>(kDeltaRuleChunkRows);

// What shared memory holds of a chunk for the columns' work (delta_rule_chunks).
struct ChunkRows {
  const float *qn, *kn, *cumulative, *betas, *kk, *qk;
  int64_t key_dim;
};

// One column of a value head's state (`column`: its first element, `stride` apart) over a chunk
// of n rows: the corrections u_i by the triangular solve, the outputs, and the state carried on.
// v and out: the column's value in the chunk's first row, `row_stride` apart.
__device__ void run_column(int n, const ChunkRows& c, const float* v, float* out, int64_t row_stride, float* column,
                           int64_t stride) {
  // S^T k_i and S^T q_i for the chunk's rows, this column of the state read once.
  float sk[C], sq[C], u[C];
#pragma unroll
  for (int i = 0; i < C; ++i) sk[i] = sq[i] = u[i] = 0.0f;
  for (int64_t d = 0; d < c.key_dim; ++d) {
    const float value = column[d * stride];
#pragma unroll
    for (int i = 0; i < C; ++i) {
      if (i < n) {
        sk[i] = fmaf(value, c.kn[i * c.key_dim + d], sk[i]);
        sq[i] = fmaf(value, c.qn[i * c.key_dim + d], sq[i]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < C; ++i) {
    if (i >= n) continue;
    float value = c.betas[i] * (v[i * row_stride] - expf(c.cumulative[i]) * sk[i]);
#pragma unroll
    for (int j = 0; j < i; ++j) value = fmaf(-c.betas[i] * c.kk[i * C + j], u[j], value);
    u[i] = value;
  }
#pragma unroll
  for (int i = 0; i < C; ++i) {
    if (i >= n) continue;
    float o = expf(c.cumulative[i]) * sq[i];
#pragma unroll
    for (int j = 0; j <= i; ++j) o = fmaf(c.qk[i * C + j], u[j], o);
    out[i * row_stride] = o;
  }
  const float last = c.cumulative[n - 1], decay = expf(last);
  float weights[C];
#pragma unroll
  for (int i = 0; i < C; ++i) weights[i] = i < n ? expf(last - c.cumulative[i]) * u[i] : 0.0f;
  for (int64_t d = 0; d < c.key_dim; ++d) {
    float updated = column[d * stride] * decay;
#pragma unroll
    for (int i = 0; i < C; ++i) {
      if (i < n) updated = fmaf(c.kn[i * c.key_dim + d], weights[i], updated);
    }
    column[d * stride] = updated;
  }
}

// Block h: value head h. Shared: a chunk's normalised q and k rows [C, key_dim] each, the
// cumulative log decays G and betas [C], the decayed products kk[i][j] = (k_i . k_j) D[i, j] and
// qk[i][j] = (q_i . k_j) D[i, j] [C, C], and the partials.
__global__ void delta_rule_chunks(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                  const float* __restrict__ g, const float* __restrict__ beta, int64_t rows,
                                  DeltaRuleShape s, float* __restrict__ state, float* __restrict__ out) {
  extern __shared__ float shared[];
  float* qn = shared;
  float* kn = qn + C * s.key_dim;
  float* cumulative = kn + C * s.key_dim;
  float* betas = cumulative + C;
  float* kk = betas + C;
  float* qk = kk + C * C;
  float* partials = qk + C * C;
  begin_after_previous_grid();
  const int64_t h = blockIdx.x, e = threadIdx.x;
  const int64_t key_head = h / (s.value_heads / s.key_heads);
  float* head_state = state + h * s.key_dim * s.value_dim;
  for (int64_t start = 0; start < rows; start += C) {
    const int n = static_cast<int>(rows - start < C ? rows - start : C);
    for (int i = 0; i < n; ++i) {
      const int64_t row = ((start + i) * s.key_heads + key_head) * s.key_dim;
      normalise_qk_row(q + row, k + row, s.key_dim, partials, qn + i * s.key_dim, kn + i * s.key_dim);
    }
    if (e == 0) {
      float sum = 0.0f;
      for (int i = 0; i < n; ++i) {
        sum += g[(start + i) * s.value_heads + h];
        cumulative[i] = sum;
        betas[i] = beta[(start + i) * s.value_heads + h];
      }
    }
    __syncthreads();
    for (int p = static_cast<int>(e); p < C * C; p += static_cast<int>(blockDim.x)) {
      const int i = p / C, j = p % C;
      if (i >= n || j > i) continue;
      float with_k = 0.0f, with_q = 0.0f;
      for (int64_t d = 0; d < s.key_dim; ++d) {
        with_k = fmaf(kn[i * s.key_dim + d], kn[j * s.key_dim + d], with_k);
        with_q = fmaf(qn[i * s.key_dim + d], kn[j * s.key_dim + d], with_q);
      }
      const float decay = expf(cumulative[i] - cumulative[j]);
      kk[p] = with_k * decay;
      qk[p] = with_q * decay;
    }
    __syncthreads();
    if (e < s.value_dim) {
      const int64_t first = (start * s.value_heads + h) * s.value_dim + e, row_stride = s.value_heads * s.value_dim;
      run_column(n, ChunkRows{qn, kn, cumulative, betas, kk, qk, s.key_dim}, v + first, out + first, row_stride,
                 head_state + e, s.value_dim);
    }
    __syncthreads();  // the next chunk rewrites the shared rows
  }
}

}  // namespace

void gated_delta_rule_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                              int64_t rows, DeltaRuleShape s, float* state, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  // A power of two (the reduction halves it) covering the value dim.
  unsigned threads = 32;
  while (threads < s.value_dim && threads < kMaxThreads) threads *= 2;
  const size_t shared_bytes = (2 * static_cast<size_t>(C * s.key_dim) + 2 * C + 2 * C * C + threads) * sizeof(float);
  launch_kernel("gated_delta_rule_chunked", delta_rule_chunks, static_cast<unsigned>(s.value_heads), threads,
                shared_bytes, stream, q, k, v, g, beta, rows, s, state, out);
}

}  // namespace flashq::cuda
