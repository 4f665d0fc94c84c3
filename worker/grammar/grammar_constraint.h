// A compiled grammar as the engine's constraint on one sequence (worker/engine/token_constraint.h):
// a matcher of its own, whose masks the engine applies to every row it chooses from, advanced
// over each output token and rolled back after the engine looks ahead along a draft.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "worker/engine/token_constraint.h"
#include "worker/grammar/compiled_grammar.h"
#include "worker/grammar/grammar_matcher.h"

namespace flashq::grammar {

class GrammarConstraint final : public TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar);

  void fill_allowed(std::span<uint32_t> allowed) const override;
  // kInternal when the grammar refuses the token: the engine chose it from a masked row.
  void advance(int32_t token) override;
  void rollback(int64_t tokens) override { matcher_.rollback(static_cast<int>(tokens)); }
  bool can_end() const override { return matcher_.can_end(); }
  std::optional<int32_t> forced_token() override;

 private:
  std::shared_ptr<const TokenTable> tokens_;
  size_t mask_words_;
  // fill_mask keeps scratch state; filling a mask changes nothing the engine can see.
  mutable GrammarMatcher matcher_;
  mutable std::vector<uint32_t> words_;  // when the engine's vocabulary differs from the table's
};

}  // namespace flashq::grammar
