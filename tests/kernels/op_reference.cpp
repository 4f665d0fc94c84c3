#include "tests/kernels/op_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace flashq::reference {

std::vector<float> matmul(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n, int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t row = 0; row < m; ++row) {
    for (int64_t col = 0; col < n; ++col) {
      double sum = 0.0;
      for (int64_t i = 0; i < k; ++i) sum += static_cast<double>(x[row * k + i]) * w[col * k + i];
      y[row * n + col] = static_cast<float>(sum);
    }
  }
  return y;
}

std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int64_t dim, float eps) {
  std::vector<float> y(x.size());
  for (size_t start = 0; start < x.size(); start += static_cast<size_t>(dim)) {
    double sum_squares = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(x[start + i]) * x[start + i];
    const double scale = 1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) y[start + i] = static_cast<float>(x[start + i] * scale * w[i]);
  }
  return y;
}

std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> sum(a.size());
  for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
  return sum;
}

std::vector<float> swiglu(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
  return out;
}

std::vector<float> rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int64_t heads,
                        int64_t head_dim, float theta) {
  std::vector<float> y = x;
  const int64_t half = head_dim / 2;
  for (size_t row = 0; row < positions.size(); ++row) {
    for (int64_t i = 0; i < half; ++i) {
      const auto inv_freq = static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * i / head_dim));
      const auto angle = static_cast<float>(positions[row] * static_cast<double>(inv_freq));
      const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
      for (int64_t h = 0; h < heads; ++h) {
        const size_t at = (row * heads + h) * head_dim + i;
        const double a = x[at], b = x[at + half];
        y[at] = static_cast<float>(a * c - b * s);
        y[at + half] = static_cast<float>(b * c + a * s);
      }
    }
  }
  return y;
}

std::vector<float> rope_with_frequencies(const std::vector<float>& x, const std::vector<int32_t>& positions,
                                         int64_t heads, int64_t head_dim, const std::vector<double>& inv_freq) {
  std::vector<float> y = x;
  const int64_t half = head_dim / 2;
  for (size_t row = 0; row < positions.size(); ++row) {
    for (int64_t i = 0; i < half; ++i) {
      const auto angle = static_cast<float>(positions[row] * static_cast<double>(static_cast<float>(inv_freq[i])));
      const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
      for (int64_t h = 0; h < heads; ++h) {
        const size_t at = (row * heads + h) * head_dim + i;
        const double a = x[at], b = x[at + half];
        y[at] = static_cast<float>(a * c - b * s);
        y[at + half] = static_cast<float>(b * c + a * s);
      }
    }
  }
  return y;
}

std::vector<double> inverse_frequencies(float theta, int64_t head_dim) {
  std::vector<double> f;
  for (int64_t i = 0; i < head_dim / 2; ++i) f.push_back(std::pow(static_cast<double>(theta), -2.0 * i / head_dim));
  return f;
}

std::vector<double> linear_inverse_frequencies(float theta, int64_t head_dim, double factor) {
  std::vector<double> f = inverse_frequencies(theta, head_dim);
  for (double& x : f) x /= factor;
  return f;
}

std::vector<double> llama3_inverse_frequencies(float theta, int64_t head_dim, double factor, double low, double high,
                                               double original) {
  std::vector<double> f = inverse_frequencies(theta, head_dim);
  const double pi = std::acos(-1.0);
  for (double& x : f) {
    const double wavelength = 2.0 * pi / x;
    if (wavelength > original / low) {
      x = x / factor;
    } else if (wavelength >= original / high) {
      const double smooth = (original / wavelength - low) / (high - low);
      x = (1.0 - smooth) * x / factor + smooth * x;
    }
  }
  return f;
}

std::vector<float> add_bias(const std::vector<float>& y, const std::vector<float>& bias, int64_t cols) {
  std::vector<float> out = y;
  for (size_t i = 0; i < out.size(); ++i) out[i] = y[i] + bias[i % static_cast<size_t>(cols)];
  return out;
}

std::vector<float> head_norm_rope(const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<int32_t>& positions, int64_t heads, int64_t head_dim, float eps,
                                  float theta) {
  return rope(rmsnorm(x, w, head_dim, eps), positions, heads, head_dim, theta);
}

std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<int32_t>& key_counts, int64_t q_heads, int64_t kv_heads,
                             int64_t head_dim) {
  std::vector<float> out(q.size(), 0.0f);
  const int64_t group = q_heads / kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  for (size_t row = 0; row < key_counts.size(); ++row) {
    const int64_t keys = key_counts[row];
    for (int64_t h = 0; h < q_heads; ++h) {
      const float* query = &q[(row * q_heads + h) * head_dim];
      const int64_t kv = h / group;
      std::vector<double> scores(static_cast<size_t>(std::max<int64_t>(keys, 0)));
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < head_dim; ++d)
          dot += static_cast<double>(query[d]) * k[(j * kv_heads + kv) * head_dim + d];
        scores[j] = dot * scale;
      }
      const double top = scores.empty() ? 0.0 : *std::max_element(scores.begin(), scores.end());
      double total = 0.0;
      for (double& s : scores) total += (s = std::exp(s - top));
      for (int64_t d = 0; d < head_dim; ++d) {
        double sum = 0.0;
        for (int64_t j = 0; j < keys; ++j) sum += scores[j] * v[(j * kv_heads + kv) * head_dim + d];
        out[(row * q_heads + h) * head_dim + d] = keys > 0 ? static_cast<float>(sum / total) : 0.0f;
      }
    }
  }
  return out;
}

std::vector<float> store_rows(const std::vector<float>& src, std::vector<float> dst, const std::vector<int32_t>& rows,
                              int64_t row_size) {
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(src.begin() + static_cast<int64_t>(i) * row_size, row_size, dst.begin() + rows[i] * row_size);
  }
  return dst;
}

std::vector<float> gather_rows(const std::vector<float>& src, const std::vector<int32_t>& rows, int64_t row_size) {
  std::vector<float> dst(rows.size() * static_cast<size_t>(row_size));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(src.begin() + rows[i] * row_size, row_size, dst.begin() + static_cast<int64_t>(i) * row_size);
  }
  return dst;
}

std::vector<float> copy_rows(const std::vector<float>& src, std::vector<float> dst, int64_t first_row,
                             int64_t row_size) {
  std::copy(src.begin(), src.end(), dst.begin() + first_row * row_size);
  return dst;
}

std::vector<float> copy_columns(const std::vector<float>& src, int64_t src_cols, std::vector<float> dst,
                                int64_t dst_cols, int64_t first_col) {
  const auto rows = static_cast<int64_t>(src.size()) / src_cols;
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t c = 0; c < src_cols; ++c) dst[m * dst_cols + first_col + c] = src[m * src_cols + c];
  }
  return dst;
}

std::vector<float> embedding(const std::vector<float>& table, const std::vector<int32_t>& ids, int64_t dim) {
  return gather_rows(table, ids, dim);
}

namespace {

// A logit as the samplers order and weigh it: NaN as -inf.
float ordered(float logit) { return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit; }

int32_t argmax_row(const float* row, int64_t vocab) {
  int32_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (ordered(row[i]) > ordered(row[best])) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t sample_row(const float* logits, const float* params, int64_t vocab) {
  const float temperature = params[0], top_p = params[2], u = params[3];
  const auto top_k = static_cast<int64_t>(params[1]);
  if (!(temperature > 0.0f)) return argmax_row(logits, vocab);

  float top = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) top = std::max(top, ordered(logits[i]));
  std::vector<float> weight(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) weight[i] = std::exp((ordered(logits[i]) - top) / temperature);

  // The candidates, largest logit first, ties by lower index; the top_k of them (0: all).
  const int64_t candidates = top_k > 0 ? std::min(top_k, vocab) : vocab;
  std::vector<int32_t> by_logit(static_cast<size_t>(vocab));
  std::iota(by_logit.begin(), by_logit.end(), 0);
  if (candidates < vocab || top_p < 1.0f) {  // else every index is kept, in whatever order
    std::stable_sort(by_logit.begin(), by_logit.end(),
                     [&](int32_t a, int32_t b) { return ordered(logits[a]) > ordered(logits[b]); });
  }
  double candidate_weight = 0.0;
  for (int64_t r = 0; r < candidates; ++r) candidate_weight += weight[by_logit[r]];

  // Of those, the shortest run from the top whose weight reaches top_p of theirs.
  std::vector<bool> kept(static_cast<size_t>(vocab), false);
  double run_weight = 0.0;
  for (int64_t r = 0; r < candidates; ++r) {
    kept[by_logit[r]] = true;
    run_weight += weight[by_logit[r]];
    if (top_p < 1.0f && run_weight >= top_p * candidate_weight) break;
  }

  // The first kept index, in index order, at which the running weight passes u of the kept weight.
  double kept_weight = 0.0;
  for (int64_t i = 0; i < vocab; ++i) kept_weight += kept[i] ? weight[i] : 0.0;
  double running = 0.0;
  int32_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!kept[i]) continue;
    running += weight[i];
    last = static_cast<int32_t>(i);
    if (u * kept_weight < running) return last;
  }
  return last;
}

}  // namespace

std::vector<float> attention_with_options(const std::vector<float>& q, const std::vector<float>& k,
                                          const std::vector<float>& v, const std::vector<int32_t>& key_counts,
                                          int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                          const std::vector<float>& sinks, int64_t window,
                                          const std::vector<int32_t>& key_starts) {
  std::vector<float> out(q.size(), 0.0f);
  const int64_t group = q_heads / kv_heads, rows_of_keys = static_cast<int64_t>(k.size()) / (kv_heads * head_dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  for (size_t row = 0; row < key_counts.size(); ++row) {
    const int64_t count = key_counts[row];
    int64_t first = window > 0 ? std::max<int64_t>(0, count - window) : 0;
    if (!key_starts.empty()) first = std::max<int64_t>(first, key_starts[row]);
    std::vector<int64_t> key_rows;  // the positions seen, as rows of k and v
    for (int64_t p = first; p < count; ++p) key_rows.push_back(window > 0 ? p % rows_of_keys : p);
    for (int64_t h = 0; h < q_heads; ++h) {
      const float* query = &q[(row * q_heads + h) * head_dim];
      const int64_t kv = h / group;
      std::vector<double> logits;
      for (int64_t r : key_rows) {
        double dot = 0.0;
        for (int64_t d = 0; d < head_dim; ++d)
          dot += static_cast<double>(query[d]) * k[(r * kv_heads + kv) * head_dim + d];
        logits.push_back(dot * scale);
      }
      if (!sinks.empty()) logits.push_back(sinks[h]);  // the sink, last, as HF concatenates it
      if (key_rows.empty()) continue;                  // zeros
      const double top = *std::max_element(logits.begin(), logits.end());
      double total = 0.0;
      for (double& s : logits) total += (s = std::exp(s - top));
      for (int64_t d = 0; d < head_dim; ++d) {
        double sum = 0.0;  // over the keys only: the sink's weight is dropped
        for (size_t j = 0; j < key_rows.size(); ++j)
          sum += logits[j] / total * v[(key_rows[j] * kv_heads + kv) * head_dim + d];
        out[(row * q_heads + h) * head_dim + d] = static_cast<float>(sum);
      }
    }
  }
  return out;
}

std::vector<double> yarn_inverse_frequencies(double theta, int64_t head_dim, double factor, double beta_fast,
                                             double beta_slow, double original, bool truncate) {
  const double pi = std::acos(-1.0), dim = static_cast<double>(head_dim);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2.0 * pi)) / (2.0 * std::log(theta));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;
  std::vector<double> f;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double extrapolated = 1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / dim);
    const double interpolated = extrapolated / factor;
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation_weight = 1.0 - ramp;
    f.push_back(interpolated * (1.0 - extrapolation_weight) + extrapolated * extrapolation_weight);
  }
  return f;
}

double yarn_attention_factor(double factor) { return factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0; }

std::vector<float> rope_with_frequencies(const std::vector<float>& x, const std::vector<int32_t>& positions,
                                         int64_t heads, int64_t head_dim, const std::vector<double>& inv_freq,
                                         double attention_factor) {
  std::vector<float> y = x;
  const int64_t half = head_dim / 2;
  const auto factor = static_cast<float>(attention_factor);  // a float32 tensor's factor, as in HF
  for (size_t row = 0; row < positions.size(); ++row) {
    for (int64_t i = 0; i < half; ++i) {
      const auto angle = static_cast<float>(positions[row] * static_cast<double>(static_cast<float>(inv_freq[i])));
      const double c = std::cos(static_cast<double>(angle)) * factor, s = std::sin(static_cast<double>(angle)) * factor;
      for (int64_t h = 0; h < heads; ++h) {
        const size_t at = (row * heads + h) * head_dim + i;
        const double a = x[at], b = x[at + half];
        y[at] = static_cast<float>(a * c - b * s);
        y[at + half] = static_cast<float>(b * c + a * s);
      }
    }
  }
  return y;
}

std::vector<int32_t> argmax(const std::vector<float>& logits, int64_t vocab) {
  std::vector<int32_t> ids;
  for (size_t start = 0; start < logits.size(); start += static_cast<size_t>(vocab)) {
    ids.push_back(argmax_row(&logits[start], vocab));
  }
  return ids;
}

std::vector<int32_t> sample(const std::vector<float>& logits, const std::vector<float>& params, int64_t vocab) {
  std::vector<int32_t> ids;
  for (size_t row = 0; row * static_cast<size_t>(vocab) < logits.size(); ++row) {
    ids.push_back(sample_row(&logits[row * vocab], &params[row * 4], vocab));
  }
  return ids;
}

}  // namespace flashq::reference
