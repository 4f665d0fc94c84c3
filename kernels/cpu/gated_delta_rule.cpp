#include "kernels/cpu/gated_delta_rule.h"

#include <cmath>
#include <vector>


namespace flashq::cpu {

void l2_normalise(const float* x, int64_t n, float scale, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const auto factor = static_cast<float>(scale / std::sqrt(sum + 1e-6));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * factor;
}

namespace {

// One row of one value head: S [Dk, Dv] decayed by `decay`, corrected towards v along k, read
// along q. Two passes over S: the first decays it and forms S^T k, the second adds k u^T and
// forms S^T q from the updated rows.
void step(float* state, const float* qn, const float* kn, const float* v, float decay, float beta, int64_t dk,
          int64_t dv, float* kv, float* u, float* out) {
  for (int64_t j = 0; j < dv; ++j) kv[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * dv;
    const float ki = kn[i];
    for (int64_t j = 0; j < dv; ++j) {
      row[j] *= decay;
      kv[j] = std::fma(row[j], ki, kv[j]);
    }
  }
  for (int64_t j = 0; j < dv; ++j) {
    u[j] = beta * (v[j] - kv[j]);
    out[j] = 0.0f;
  }
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * dv;
    const float ki = kn[i], qi = qn[i];
    for (int64_t j = 0; j < dv; ++j) {
      row[j] = std::fma(ki, u[j], row[j]);
      out[j] = std::fma(row[j], qi, out[j]);
    }
  }
}

}  // namespace

void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t rows,
                      DeltaRuleShape s, float* state, float* out) {
  const int64_t group = s.value_heads / s.key_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.key_dim));
#pragma omp parallel for schedule(static) if (rows * s.value_heads * s.key_dim * s.value_dim >= (int64_t{1} << 16))
  for (int64_t h = 0; h < s.value_heads; ++h) {
    std::vector<float> qn(static_cast<size_t>(s.key_dim)), kn(qn.size());
    std::vector<float> kv(static_cast<size_t>(s.value_dim)), u(kv.size());
    float* head_state = state + h * s.key_dim * s.value_dim;
    const int64_t key_head = h / group;
    for (int64_t t = 0; t < rows; ++t) {
      const int64_t qk_at = (t * s.key_heads + key_head) * s.key_dim;
      const int64_t v_at = (t * s.value_heads + h) * s.value_dim;
      l2_normalise(q + qk_at, s.key_dim, q_scale, qn.data());
      l2_normalise(k + qk_at, s.key_dim, 1.0f, kn.data());
      const float decay = std::exp(g[t * s.value_heads + h]);
      step(head_state, qn.data(), kn.data(), v + v_at, decay, beta[t * s.value_heads + h], s.key_dim, s.value_dim,
           kv.data(), u.data(), out + v_at);
    }
  }
}

}  // namespace flashq::cpu
