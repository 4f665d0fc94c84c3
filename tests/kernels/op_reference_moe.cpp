#include "tests/kernels/op_reference_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace flashq::reference {

double e2m1(int code) {
  const int sign = (code >> 3) & 1, exponent = (code >> 1) & 3, mantissa = code & 1;
  const double magnitude = exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
  return sign ? -magnitude : magnitude;
}

std::vector<float> decode_mxfp4(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& scales, int64_t n,
                                int64_t k) {
  std::vector<float> w(static_cast<size_t>(n * k));
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t p = 0; p < k; ++p) {
      const uint8_t byte = blocks[static_cast<size_t>(row * (k / 2) + p / 2)];
      const int code = p % 2 == 0 ? byte & 0x0f : byte >> 4;
      const int scale = scales[static_cast<size_t>(row * (k / 32) + p / 32)];
      w[static_cast<size_t>(row * k + p)] = static_cast<float>(std::ldexp(e2m1(code), scale - 127));
    }
  }
  return w;
}

std::vector<double> linear_row(const float* x, const DenseLinear& l) {
  std::vector<double> y(static_cast<size_t>(l.out));
  for (int64_t o = 0; o < l.out; ++o) {
    double sum = l.bias.empty() ? 0.0 : l.bias[static_cast<size_t>(o)];
    for (int64_t i = 0; i < l.in; ++i) sum += static_cast<double>(x[i]) * l.w[static_cast<size_t>(o * l.in + i)];
    y[static_cast<size_t>(o)] = sum;
  }
  return y;
}

Routing moe_route(const std::vector<float>& logits, int64_t experts, int64_t top_k, bool softmax_first,
                  bool normalize) {
  Routing r;
  const int64_t rows = static_cast<int64_t>(logits.size()) / experts;
  for (int64_t m = 0; m < rows; ++m) {
    const float* row = logits.data() + m * experts;
    std::vector<int32_t> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    // Descending by logit (softmax keeps the order), the lower index first among equals.
    std::stable_sort(order.begin(), order.end(), [row](int32_t a, int32_t b) { return row[a] > row[b]; });
    const double top = row[order[0]];
    double all = 0.0, picked = 0.0;
    for (int64_t e = 0; e < experts; ++e) all += std::exp(row[e] - top);
    for (int64_t j = 0; j < top_k; ++j) picked += std::exp(row[order[static_cast<size_t>(j)]] - top);
    for (int64_t j = 0; j < top_k; ++j) {
      const int32_t id = order[static_cast<size_t>(j)];
      double weight = std::exp(row[id] - top) / (softmax_first ? all : picked);
      if (softmax_first && normalize) weight /= picked / all;
      r.ids.push_back(id);
      r.weights.push_back(static_cast<float>(weight));
    }
  }
  return r;
}

double expert_activation(double g, double u, bool clamped, double alpha, double limit) {
  if (!clamped) return g / (1.0 + std::exp(-g)) * u;
  g = std::min(g, limit);
  u = std::clamp(u, -limit, limit);
  return (u + 1.0) * g / (1.0 + std::exp(-alpha * g));
}

std::vector<float> moe_experts(const std::vector<float>& x, int64_t rows, int64_t hidden,
                               const std::vector<int32_t>& ids, const std::vector<float>& weights, int64_t top_k,
                               const std::vector<DenseExpert>& experts, bool clamped, double alpha, double limit) {
  std::vector<float> out(static_cast<size_t>(rows * hidden));
  for (int64_t m = 0; m < rows; ++m) {
    const float* xm = x.data() + m * hidden;
    std::vector<double> sum(static_cast<size_t>(hidden), 0.0);
    for (int64_t j = 0; j < top_k; ++j) {
      const DenseExpert& e = experts[static_cast<size_t>(ids[static_cast<size_t>(m * top_k + j)])];
      std::vector<double> gate, up;
      if (e.interleaved) {
        const std::vector<double> both = linear_row(xm, e.gate_up);
        for (size_t i = 0; i < both.size(); i += 2) {
          gate.push_back(both[i]);
          up.push_back(both[i + 1]);
        }
      } else {
        gate = linear_row(xm, e.gate);
        up = linear_row(xm, e.up);
      }
      std::vector<float> act(gate.size());
      for (size_t i = 0; i < gate.size(); ++i) {
        act[i] = static_cast<float>(expert_activation(gate[i], up[i], clamped, alpha, limit));
      }
      const std::vector<double> down = linear_row(act.data(), e.down);
      const double w = weights[static_cast<size_t>(m * top_k + j)];
      for (int64_t h = 0; h < hidden; ++h) sum[static_cast<size_t>(h)] += w * down[static_cast<size_t>(h)];
    }
    for (int64_t h = 0; h < hidden; ++h) out[static_cast<size_t>(m * hidden + h)] = static_cast<float>(sum[h]);
  }
  return out;
}

}  // namespace flashq::reference
