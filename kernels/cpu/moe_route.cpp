#include "kernels/cpu/moe_route.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace flashq::cpu {

void moe_route(const float* logits, int64_t rows, int64_t experts, const MoeRouting& routing, int32_t* ids,
               float* weights) {
  const int64_t k = routing.top_k;
#pragma omp parallel if (rows * experts >= (int64_t{1} << 14))
  {
    std::vector<int32_t> order(static_cast<size_t>(experts));
#pragma omp for schedule(static)
    for (int64_t m = 0; m < rows; ++m) {
      const float* row = logits + m * experts;
      // A strict weak order: numbers by value, descending, then NaN; equals by index.
      auto heavier = [row](int32_t a, int32_t b) {
        const bool a_nan = std::isnan(row[a]), b_nan = std::isnan(row[b]);
        if (a_nan != b_nan) return b_nan;
        if (!a_nan && row[a] != row[b]) return row[a] > row[b];
        return a < b;
      };
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), heavier);
      const double top = row[order[0]];
      int32_t* row_ids = ids + m * k;
      float* row_weights = weights + m * k;
      // Softmax over all experts (then possibly renormalised over the k) or over the k alone.
      const bool over_all = routing.order == RoutingOrder::kSoftmaxThenTopK;
      double denominator = 0.0;
      if (over_all) {
        for (int64_t e = 0; e < experts; ++e) denominator += std::exp(row[e] - top);
      } else {
        for (int64_t j = 0; j < k; ++j) denominator += std::exp(row[order[static_cast<size_t>(j)]] - top);
      }
      double picked = 0.0;
      for (int64_t j = 0; j < k; ++j) picked += std::exp(row[order[static_cast<size_t>(j)]] - top);
      if (over_all && routing.normalize_top_k) denominator = picked;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t id = order[static_cast<size_t>(j)];
        row_ids[j] = id;
        row_weights[j] = static_cast<float>(std::exp(row[id] - top) / denominator);
      }
    }
  }
}

}  // namespace flashq::cpu
