#include "worker/engine/token_mask.h"

#include <algorithm>
#include <limits>

#include "worker/engine/sampler.h"

namespace flashq {

void TokenMask::fill(const TokenConstraint& constraint, std::span<const int32_t> end_ids) {
  std::fill(words_.begin(), words_.end(), 0u);
  constraint.fill_allowed(words_);
  // A constraint that allows nothing more ends the output, whether it says it may or not.
  const bool stuck = std::all_of(words_.begin(), words_.end(), [](uint32_t w) { return w == 0; });
  if (!constraint.can_end() && !stuck) return;
  for (int32_t id : end_ids) {
    if (id >= 0 && id < vocab_) words_[static_cast<size_t>(id) / 32] |= 1u << (static_cast<uint32_t>(id) % 32);
  }
}

bool TokenMask::allows(int32_t token) const {
  if (token < 0 || token >= vocab_) return false;
  return (words_[static_cast<size_t>(token) / 32] >> (static_cast<uint32_t>(token) % 32)) & 1u;
}

void TokenMask::apply(std::span<float> logits) const {
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), static_cast<size_t>(vocab_));
  for (size_t t = 0; t < n; ++t) {
    if (!((words_[t / 32] >> (t % 32)) & 1u)) logits[t] = minus_infinity;
  }
  for (size_t t = n; t < logits.size(); ++t) logits[t] = minus_infinity;  // padding rows of the LM head
}

void choose_constrained_draft(TokenConstraint& constraint, std::span<const int32_t> end_ids,
                              std::span<const float> rows, int64_t vocab, TokenMask& mask,
                              std::vector<int32_t>& draft) {
  const size_t width = static_cast<size_t>(vocab);
  const size_t count = rows.size() / width;
  std::vector<float> row(width);
  draft.clear();
  int64_t advanced = 0;
  for (size_t j = 0; j < count; ++j) {
    if (!draft.empty() && std::find(end_ids.begin(), end_ids.end(), draft.back()) != end_ids.end()) {
      draft.push_back(draft.back());
      continue;
    }
    std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(j * width), width, row.begin());
    mask.fill(constraint, end_ids);
    mask.apply(row);
    draft.push_back(argmax(row));
    if (std::find(end_ids.begin(), end_ids.end(), draft.back()) == end_ids.end()) {
      constraint.advance(draft.back());
      ++advanced;
    }
  }
  constraint.rollback(advanced);
}

}  // namespace flashq
