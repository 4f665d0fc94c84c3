#include "kernels/cpu/gated_delta_rule_chunked.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace flashq::cpu {
namespace {

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

// y += a * x over n values.
void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

// One value head's working rows for a chunk.
struct ChunkRows {
  std::vector<float> qn, kn;      // [C, Dk], normalised (q scaled)
  std::vector<float> cumulative;  // G [C]
  std::vector<float> u;           // [C, Dv]
};

// Rows [0, n) of one chunk of one value head; `state` [Dk, Dv] carried to after its last row.
void run_chunk(int64_t n, int64_t dk, int64_t dv, const float* v_rows, int64_t v_stride, const float* beta_rows,
               int64_t beta_stride, ChunkRows& c, float* state, float* out_rows, int64_t out_stride) {
  const auto G = [&c](int64_t i) { return c.cumulative[static_cast<size_t>(i)]; };
  float* u = c.u.data();
  // S^T k_i into u_i and S^T q_i into out_i for every row, each row of the state read once.
  std::fill(u, u + n * dv, 0.0f);
  for (int64_t i = 0; i < n; ++i) std::fill(out_rows + i * out_stride, out_rows + i * out_stride + dv, 0.0f);
  for (int64_t d = 0; d < dk; ++d) {
    const float* state_row = state + d * dv;
    for (int64_t i = 0; i < n; ++i) {
      axpy(c.kn[static_cast<size_t>(i * dk + d)], state_row, u + i * dv, dv);
      axpy(c.qn[static_cast<size_t>(i * dk + d)], state_row, out_rows + i * out_stride, dv);
    }
  }
  // u_i = beta_i (v_i - exp(G_i) S^T k_i) - sum over j < i of beta_i (k_i . k_j) D[i, j] u_j, in row
  // order (the triangular solve).
  for (int64_t i = 0; i < n; ++i) {
    float* u_i = u + i * dv;
    const float* k_i = c.kn.data() + i * dk;
    const float beta = beta_rows[i * beta_stride], decay = std::exp(G(i));
    const float* v = v_rows + i * v_stride;
    for (int64_t e = 0; e < dv; ++e) u_i[e] = beta * (v[e] - decay * u_i[e]);
    for (int64_t j = 0; j < i; ++j) {
      axpy(-beta * std::exp(G(i) - G(j)) * dot(k_i, c.kn.data() + j * dk, dk), u + j * dv, u_i, dv);
    }
  }
  // out_i = exp(G_i) S^T q_i + sum over j <= i of (q_i . k_j) D[i, j] u_j.
  for (int64_t i = 0; i < n; ++i) {
    float* o = out_rows + i * out_stride;
    const float* q_i = c.qn.data() + i * dk;
    const float decay = std::exp(G(i));
    for (int64_t e = 0; e < dv; ++e) o[e] *= decay;
    for (int64_t j = 0; j <= i; ++j)
      axpy(std::exp(G(i) - G(j)) * dot(q_i, c.kn.data() + j * dk, dk), u + j * dv, o, dv);
  }
  // S <- exp(G_n) S + sum over i of exp(G_n - G_i) k_i u_i^T.
  const float last = G(n - 1);
  for (int64_t d = 0; d < dk; ++d) {
    float* state_row = state + d * dv;
    const float decay = std::exp(last);
    for (int64_t e = 0; e < dv; ++e) state_row[e] *= decay;
    for (int64_t i = 0; i < n; ++i) {
      axpy(std::exp(last - G(i)) * c.kn[static_cast<size_t>(i * dk + d)], u + i * dv, state_row, dv);
    }
  }
}

}  // namespace

void gated_delta_rule_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                              int64_t rows, DeltaRuleShape s, float* state, float* out) {
  const int64_t group = s.value_heads / s.key_heads, C = kDeltaRuleChunkRows;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.key_dim));
#pragma omp parallel for schedule(static) if (rows * s.value_heads * s.key_dim * s.value_dim >= (int64_t{1} << 16))
  for (int64_t h = 0; h < s.value_heads; ++h) {
    ChunkRows c{.qn = std::vector<float>(static_cast<size_t>(C * s.key_dim)),
                .kn = std::vector<float>(static_cast<size_t>(C * s.key_dim)),
                .cumulative = std::vector<float>(static_cast<size_t>(C)),
                .u = std::vector<float>(static_cast<size_t>(C * s.value_dim))};
    float* head_state = state + h * s.key_dim * s.value_dim;
    const int64_t key_head = h / group;
    for (int64_t start = 0; start < rows; start += C) {
      const int64_t n = std::min(C, rows - start);
      float cumulative = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = start + i, qk_at = (t * s.key_heads + key_head) * s.key_dim;
        l2_normalise(q + qk_at, s.key_dim, q_scale, c.qn.data() + i * s.key_dim);
        l2_normalise(k + qk_at, s.key_dim, 1.0f, c.kn.data() + i * s.key_dim);
        cumulative += g[t * s.value_heads + h];
        c.cumulative[static_cast<size_t>(i)] = cumulative;
      }
      const int64_t first = start * s.value_heads + h;  // row start's (value head h) index
      run_chunk(n, s.key_dim, s.value_dim, v + first * s.value_dim, s.value_heads * s.value_dim, beta + first,
                s.value_heads, c, head_state, out + first * s.value_dim, s.value_heads * s.value_dim);
    }
  }
}

}  // namespace flashq::cpu
