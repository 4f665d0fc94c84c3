#include "worker/engine/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashq {

RowLogprobs RowLogprobs::of(std::span<const float> logits, int32_t top) {
  RowLogprobs row;
  float peak = -std::numeric_limits<float>::infinity();
  for (float x : logits) peak = std::max(peak, x);
  double sum = 0;  // in double: a vocabulary of terms
  for (float x : logits) sum += std::exp(static_cast<double>(x) - static_cast<double>(peak));
  row.log_normaliser = peak + static_cast<float>(std::log(sum));

  const auto count = static_cast<size_t>(std::clamp<int32_t>(top, 0, static_cast<int32_t>(logits.size())));
  std::vector<int32_t> ids(logits.size());
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int32_t>(t);
  auto higher = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count), ids.end(), higher);
  for (size_t k = 0; k < count; ++k) {
    row.top.push_back({ids[k], logits[static_cast<size_t>(ids[k])] - row.log_normaliser});
  }
  return row;
}

}  // namespace flashq
