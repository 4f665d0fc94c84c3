#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/argmax.h"

namespace flashq::cpu {
namespace {

int32_t sample_row(const float* logits, const float* params, int64_t vocab, std::vector<int32_t>& order,
                   std::vector<float>& weights, std::vector<char>& kept) {
  const float temperature = params[0], top_p = params[2], u = params[3];
  const auto top_k = static_cast<int64_t>(params[1]);
  if (!(temperature > 0.0f)) {
    int32_t id = 0;
    argmax(logits, &id, 1, vocab);
    return id;
  }
  auto logit = [&](int64_t i) { return ordered_logit(logits[i]); };
  float max_logit = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, logit(i));
  weights.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) weights[i] = std::exp((logit(i) - max_logit) / temperature);

  const int64_t keep = top_k > 0 ? std::min(vocab, top_k) : vocab;
  kept.assign(static_cast<size_t>(vocab), keep == vocab && top_p >= 1.0f);
  if (keep < vocab || top_p < 1.0f) {
    order.resize(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    auto larger = [&](int32_t a, int32_t b) { return logit(a) > logit(b) || (logit(a) == logit(b) && a < b); };
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), larger);
    double total = 0.0;
    for (int64_t r = 0; r < keep; ++r) total += weights[order[r]];
    double mass = 0.0;
    for (int64_t r = 0; r < keep; ++r) {
      kept[order[r]] = 1;
      mass += weights[order[r]];
      if (top_p < 1.0f && mass >= top_p * total) break;
    }
  }
  // Sums in double: a float running sum over a large vocabulary drifts by many weights.
  double kept_weight = 0.0;
  for (int64_t i = 0; i < vocab; ++i) kept_weight += kept[i] ? weights[i] : 0.0f;
  const double target = u * kept_weight;
  double running = 0.0;
  int32_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!kept[i]) continue;
    running += weights[i];
    last = static_cast<int32_t>(i);
    if (target < running) return last;
  }
  return last;
}

}  // namespace

void sample_rows(const float* logits, const float* params, int32_t* ids, int64_t rows, int64_t vocab) {
  std::vector<int32_t> order;
  std::vector<float> weights;
  std::vector<char> kept;
  for (int64_t m = 0; m < rows; ++m) {
    ids[m] = sample_row(logits + m * vocab, params + m * kSampleParams, vocab, order, weights, kept);
  }
}

}  // namespace flashq::cpu
