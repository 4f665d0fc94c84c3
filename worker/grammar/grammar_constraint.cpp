#include "worker/grammar/grammar_constraint.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace flashq::grammar {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar)
    : mask_words_(grammar->tokens().mask_words()), matcher_(std::move(grammar)) {}

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

}  // namespace flashq::grammar
