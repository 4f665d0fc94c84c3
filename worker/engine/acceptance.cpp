#include "worker/engine/acceptance.h"

#include <algorithm>
#include <vector>

#include "shared/error.h"

namespace flashq {
namespace {

std::span<const float> row(std::span<const float> logits, int64_t vocab, int64_t j) {
  return logits.subspan(static_cast<size_t>(j * vocab), static_cast<size_t>(vocab));
}

float probability_of(const DraftDistribution& q, int32_t token) {
  float total = 0.0f;
  for (size_t i = 0; i < q.ids.size(); ++i) total += q.ids[i] == token ? q.probs[i] : 0.0f;
  return total;
}

// probs = max(0, probs - q), left as it was when nothing would remain (z-lab's fallback to p).
void subtract_draft(const DraftDistribution& q, std::vector<float>& probs) {
  std::vector<float> residual = probs;
  for (size_t i = 0; i < q.ids.size(); ++i) {
    float& p = residual[static_cast<size_t>(q.ids[i])];
    p = std::max(0.0f, p - q.probs[i]);
  }
  double total = 0.0;
  for (float p : residual) total += p;
  if (total > 0.0) probs = std::move(residual);
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
                                       Sampler& sampler, std::span<const DraftDistribution> draft_q) {
  check_invariant(draft_q.empty() || draft_q.size() == draft.size(), "a draft distribution per draft token");
  Acceptance result;
  std::vector<float> probs;
  for (size_t i = 0; i < draft.size(); ++i) {
    const int32_t token = draft[i];
    sampler.distribution(row(logits, vocab, result.accepted), probs);
    const float q = draft_q.empty() ? 1.0f : probability_of(draft_q[i], token);
    if (sampler.uniform() * q < probs[static_cast<size_t>(token)]) {
      ++result.accepted;
      continue;
    }
    if (draft_q.empty()) {
      probs[static_cast<size_t>(token)] = 0.0f;  // the residual of a point-mass draft
    } else {
      subtract_draft(draft_q[i], probs);
    }
    result.bonus = sampler.draw(probs);
    return result;
  }
  result.bonus = sampler.sample(row(logits, vocab, result.accepted));
  return result;
}

}  // namespace flashq
