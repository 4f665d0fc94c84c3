#include "worker/engine/acceptance.h"

#include <vector>

namespace flashq {
namespace {

std::span<const float> row(std::span<const float> logits, int64_t vocab, int64_t j) {
  return logits.subspan(static_cast<size_t>(j * vocab), static_cast<size_t>(vocab));
}

}  // namespace

Acceptance accept_longest_prefix(std::span<const int32_t> draft, std::span<const int32_t> choices) {
  Acceptance result;
  for (int32_t token : draft) {
    if (choices[static_cast<size_t>(result.accepted)] != token) break;
    ++result.accepted;
  }
  result.bonus = choices[static_cast<size_t>(result.accepted)];
  return result;
}

Acceptance accept_speculative_sampling(std::span<const int32_t> draft, std::span<const float> logits, int64_t vocab,
                                       Sampler& sampler) {
  Acceptance result;
  std::vector<float> probs;
  for (int32_t token : draft) {
    sampler.distribution(row(logits, vocab, result.accepted), probs);
    if (sampler.uniform() < probs[static_cast<size_t>(token)]) {
      ++result.accepted;
      continue;
    }
    probs[static_cast<size_t>(token)] = 0.0f;  // the residual of a point-mass draft
    result.bonus = sampler.draw(probs);
    return result;
  }
  result.bonus = sampler.sample(row(logits, vocab, result.accepted));
  return result;
}

}  // namespace flashq
