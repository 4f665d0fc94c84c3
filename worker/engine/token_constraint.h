// What a sequence may output next: a grammar's state over the output (structured outputs), which
// the engine advances over every token the output takes and rolls back after looking ahead along
// a draft. The engine masks every row it chooses from with it: the target's verification rows
// (each at the state the draft reaches there), the prefill's row, and the drafter's rows position
// by position, so a draft never proposes a token the constraint forbids. Acceptance then runs on
// the masked, renormalised distributions, and the output is exactly the target's distribution
// restricted to the constraint (greedy: the allowed argmax), with speculation or without.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace flashq {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // Sets bit t (word t / 32, bit t % 32) of `allowed`, which the caller has cleared, for every
  // token t that may come next. End-of-output ids are the engine's: see can_end().
  virtual void fill_allowed(std::span<uint32_t> allowed) const = 0;
  // The output took `token` (one fill_allowed allowed).
  virtual void advance(int32_t token) = 0;
  // Undoes the last `tokens` advances.
  virtual void rollback(int64_t tokens) = 0;
  // Whether the output may end here: the eos and stop ids are allowed only then.
  virtual bool can_end() const = 0;
  // The one token allowed next, if exactly one is (nothing else, no end): the engine appends a
  // run of them to the block it verifies without drafting them (jump-forward). By default none.
  virtual std::optional<int32_t> forced_token() { return std::nullopt; }
};

}  // namespace flashq
