// The tokens a constrained sequence may take next, as a bitset over the vocabulary, and the
// logits of every other token set to -inf (so that argmax and sampling see the distribution
// restricted to the allowed tokens, renormalised).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "worker/engine/token_constraint.h"

namespace flashq {

class TokenMask {
 public:
  explicit TokenMask(int64_t vocab) : vocab_(vocab), words_(static_cast<size_t>((vocab + 31) / 32)) {}

  // The constraint's allowed tokens, and `end_ids` (eos, stop ids) where it may end or allows
  // nothing else.
  void fill(const TokenConstraint& constraint, std::span<const int32_t> end_ids);
  bool allows(int32_t token) const;
  // Logits of the tokens not allowed set to -inf.
  void apply(std::span<float> logits) const;

 private:
  int64_t vocab_;
  std::vector<uint32_t> words_;
};

// A draft of `rows.size() / vocab` tokens chosen position by position from the drafter's rows
// (row j proposes draft position j+1): each the argmax of its row masked at the state the draft
// has reached, so that the draft keeps to the constraint; after an end id the rest repeat it
// (the output ends there if the target accepts it). The constraint is back where it was after.
void choose_constrained_draft(TokenConstraint& constraint, std::span<const int32_t> end_ids,
                              std::span<const float> rows, int64_t vocab, TokenMask& mask,
                              std::vector<int32_t>& draft);

}  // namespace flashq
