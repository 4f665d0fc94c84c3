#include "kernels/cpu/deltanet_gates.h"

#include <cmath>

namespace flashq::cpu {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// torch's softplus (beta 1, threshold 20): x itself above the threshold.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void delta_rule_gates(const float* a, const float* b, WeightVector a_log, WeightVector dt_bias, int64_t rows,
                      int64_t heads, float* g, float* beta) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t i = r * heads + h;
      beta[i] = sigmoid(b[i]);
      g[i] = -std::exp(a_log[h]) * softplus(a[i] + dt_bias[h]);
    }
  }
}

void gated_rmsnorm(const float* x, const float* z, WeightVector w, float eps, int64_t vectors, int64_t dim,
                   float* out) {
#pragma omp parallel for schedule(static) if (vectors * dim >= (int64_t{1} << 16))
  for (int64_t n = 0; n < vectors; ++n) {
    const float* xn = x + n * dim;
    const float* zn = z + n * dim;
    float* on = out + n * dim;
    double squares = 0.0;
    for (int64_t d = 0; d < dim; ++d) squares += static_cast<double>(xn[d]) * xn[d];
    const auto inverse = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(dim) + eps));
    for (int64_t d = 0; d < dim; ++d) on[d] = xn[d] * inverse * w[d] * (zn[d] * sigmoid(zn[d]));
  }
}

void sigmoid_gate(float* x, const float* gate, int64_t count, int64_t per_gate) {
  if (per_gate == 1) {
    for (int64_t i = 0; i < count; ++i) x[i] *= sigmoid(gate[i]);
    return;
  }
  for (int64_t i = 0; i < count; ++i) x[i] *= sigmoid(gate[i / per_gate]);
}

}  // namespace flashq::cpu
