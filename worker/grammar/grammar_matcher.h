// The grammar's state for one sequence: which tokens may come next, what generation may end on,
// and rollback when speculative draft tokens are rejected. Not thread-safe; one per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "worker/grammar/byte_stepper.h"
#include "worker/grammar/compiled_grammar.h"

namespace flashq::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances by the token's bytes, or, for an end token, ends the sequence where the grammar
  // may end. False (and nothing changes) when the grammar does not allow it.
  bool accept_token(int32_t id);
  // Advances by raw bytes as one step (rollback(1) undoes it). False, unchanged, when refused.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last `steps` accepted tokens (or accept_bytes calls); kInvalidArgument when fewer
  // were accepted.
  void rollback(int steps);
  void reset();
  // Whether the text so far is a complete sentence of the grammar (an end token is allowed).
  bool can_end() const;
  // Whether an end token was accepted: nothing more is allowed.
  bool is_terminated() const { return terminated_.back(); }
  // Sets exactly the allowed token ids in `mask` (bit id%32 of word id/32; every other bit is
  // cleared). `mask` must hold TokenTable::mask_words() words.
  void fill_mask(std::span<uint32_t> mask);
  // For a speculative draft: the mask after each prefix of `draft` the grammar accepts. Mask i
  // (words [i*W, (i+1)*W) of `masks`, W = TokenTable::mask_words()) is the mask after the first
  // i draft tokens, for i = 0..n, where n draft tokens are accepted (n stops at the first the
  // grammar refuses); returns n. The matcher is left as it was: after verification, accept the
  // tokens the target kept. `masks` must hold (draft.size() + 1) * W words.
  size_t fill_draft_masks(std::span<const int32_t> draft, std::span<uint32_t> masks);
  // The one token allowed here, if exactly one is.
  std::optional<int32_t> forced_token();
  size_t accepted_steps() const { return history_.size() - 1; }

 private:
  bool advance(std::string_view bytes, StackSet& out);
  void add_uncertain_tokens(const StackSet& stacks, const TokenMaskEntry& entry, std::span<uint32_t> mask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  StackPool pool_;
  ByteStepper stepper_;
  std::vector<StackSet> history_;  // history_.back(): the stacks now
  std::vector<bool> terminated_;
  StackSet scratch_a_;
  std::vector<StackSet> walk_states_;
};

}  // namespace flashq::grammar
