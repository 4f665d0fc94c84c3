#include "worker/grammar/grammar_constraint.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace flashq::grammar {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar)
    : tokens_(grammar->shared_tokens()), mask_words_(tokens_->mask_words()), matcher_(std::move(grammar)) {}

void GrammarConstraint::fill_allowed(std::span<uint32_t> allowed) const {
  if (allowed.size() == mask_words_) {
    matcher_.fill_mask(allowed);
    return;
  }
  words_.resize(mask_words_);
  matcher_.fill_mask(words_);
  std::copy_n(words_.begin(), std::min(words_.size(), allowed.size()), allowed.begin());
}

void GrammarConstraint::advance(int32_t token) {
  if (!matcher_.accept_token(token)) {
    throw Error(ErrorCode::kInternal, "the grammar refused token " + std::to_string(token) + ", which its mask allowed");
  }
}

std::optional<int32_t> GrammarConstraint::forced_token() {
  const std::optional<int32_t> only = matcher_.forced_token();
  // An end token alone is the engine's to choose (the output ends there), not a token to append.
  if (only && tokens_->is_end_token(*only)) return std::nullopt;
  return only;
}

}  // namespace flashq::grammar
