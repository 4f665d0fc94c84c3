// Chi-square tests for the sampling suites: goodness of fit of counts to known probabilities, and
// homogeneity of two samples of categories (is speculative sampling's output distributed as plain
// sampling's?). Critical values at p = 0.001.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace flashq::testing {

// The chi-square value a correct sampler exceeds with probability 0.001, by degrees of freedom.
inline double chi_square_critical_0_001(int64_t degrees_of_freedom) {
  static constexpr std::array<double, 30> kCritical = {
      10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588,
      31.264, 32.909, 34.528, 36.123, 37.697, 39.252, 40.790, 42.312, 43.820, 45.315,
      46.797, 48.268, 49.728, 51.179, 52.620, 54.052, 55.476, 56.892, 58.301, 59.703};
  if (degrees_of_freedom < 1 || degrees_of_freedom > static_cast<int64_t>(kCritical.size())) {
    throw std::out_of_range("chi-square table holds 1..30 degrees of freedom");
  }
  return kCritical[static_cast<size_t>(degrees_of_freedom - 1)];
}

// The chi-square value a correct sampler exceeds with probability 0.00001, by the Wilson-Hilferty
// approximation: from 3 degrees of freedom up it lies above the exact quantile by at most 6% (25.9
// exact against 27.3 at 3, 41.3 against 42.0 at 10), so a correct sampler fails it even less
// often. For suites that run many statistics and must essentially never fail by chance.
inline double chi_square_critical_0_00001(int64_t degrees_of_freedom) {
  if (degrees_of_freedom < 3) throw std::out_of_range("the approximation needs 3 or more degrees of freedom");
  constexpr double kNormalQuantile = 4.2649;  // P(Z > z) = 0.00001
  const double k = static_cast<double>(degrees_of_freedom);
  const double a = 2.0 / (9.0 * k);
  const double root = 1.0 - a + kNormalQuantile * std::sqrt(a);
  return k * root * root * root;
}

// Goodness of fit of observed counts to probabilities (categories with probability 0 excluded;
// the caller checks they were never drawn).
inline double chi_square_goodness_of_fit(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  double chi = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0) continue;
    const double expected = n * probs[i];
    chi += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) / expected;
  }
  return chi;
}

inline int64_t support_size(const std::vector<double>& probs) {
  return std::count_if(probs.begin(), probs.end(), [](double p) { return p > 0; });
}

// Homogeneity of two samples of categories (token ids, or any code of them): the most frequent
// categories are cells of their own as long as each holds at least `min_count` draws over both
// samples (at most `max_categories` - 1 of them); the rest are pooled into one more cell.
struct Homogeneity {
  double chi_square = 0;
  int64_t degrees_of_freedom = 0;
};

inline Homogeneity chi_square_homogeneity(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                          int64_t min_count, int64_t max_categories) {
  std::map<int64_t, std::array<int64_t, 2>> counts;
  for (int64_t t : a) ++counts[t][0];
  for (int64_t t : b) ++counts[t][1];
  std::vector<std::array<int64_t, 2>> by_total;
  for (const auto& [category, c] : counts) by_total.push_back(c);
  std::sort(by_total.begin(), by_total.end(), [](const auto& x, const auto& y) { return x[0] + x[1] > y[0] + y[1]; });
  std::vector<std::array<int64_t, 2>> table;
  std::array<int64_t, 2> pooled = {0, 0};
  for (const auto& c : by_total) {
    if (c[0] + c[1] >= min_count && static_cast<int64_t>(table.size()) < max_categories - 1) {
      table.push_back(c);
    } else {
      pooled[0] += c[0];
      pooled[1] += c[1];
    }
  }
  if (pooled[0] + pooled[1] > 0) table.push_back(pooled);
  const double n_a = static_cast<double>(a.size()), n_b = static_cast<double>(b.size()), n = n_a + n_b;
  Homogeneity h;
  for (const auto& c : table) {
    const double total = static_cast<double>(c[0] + c[1]);
    const double expected_a = total * n_a / n, expected_b = total * n_b / n;
    h.chi_square += (static_cast<double>(c[0]) - expected_a) * (static_cast<double>(c[0]) - expected_a) / expected_a;
    h.chi_square += (static_cast<double>(c[1]) - expected_b) * (static_cast<double>(c[1]) - expected_b) / expected_b;
  }
  h.degrees_of_freedom = static_cast<int64_t>(table.size()) - 1;
  return h;
}

inline Homogeneity chi_square_homogeneity(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                          int64_t min_count, int64_t max_categories) {
  return chi_square_homogeneity(std::vector<int64_t>(a.begin(), a.end()), std::vector<int64_t>(b.begin(), b.end()),
                                min_count, max_categories);
}

}  // namespace flashq::testing
