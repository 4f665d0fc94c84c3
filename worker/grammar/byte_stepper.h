// One step of the pushdown recogniser: from a set of stacks, the set after one byte. Every stack
// in a set has a byte-set element on top, or is kEmptyStack (nothing left to match). Rule
// references are expanded eagerly; a reference that ends its alternative pushes nothing (the
// tail call that keeps `x ::= "a" x | ""` at constant depth).
#pragma once

#include <cstdint>
#include <vector>

#include "worker/grammar/grammar.h"
#include "worker/grammar/stack_pool.h"

namespace flashq::grammar {

using StackSet = std::vector<int32_t>;

// Stacks alive at once. An ambiguous grammar can keep many parses open; past this many, matching
// stops with kInvalidArgument rather than slowing down without bound.
inline constexpr size_t kMaxStacks = 20'000;

class ByteStepper {
 public:
  ByteStepper(const Grammar& grammar, StackPool& pool) : grammar_(grammar), pool_(pool) {}

  // The stacks that start matching at `position` with `below` under it, added to `out`.
  void expand(int32_t position, int32_t below, StackSet& out);
  // The stacks after `byte`; empty when no stack accepts it. Throws kInvalidArgument past
  // kMaxStacks.
  void advance(const StackSet& stacks, uint8_t byte, StackSet& out);
  // The initial stacks of the grammar's root rule.
  StackSet start();
  // Grammar positions visited so far: the work done, for budgets.
  uint64_t visits() const { return visits_; }

 private:
  void visit(int32_t position, int32_t below, StackSet& out, int depth);
  bool first_visit(int32_t node);

  const Grammar& grammar_;
  StackPool& pool_;
  std::vector<uint32_t> visited_;  // per pool node: the step that last reached it
  uint32_t step_ = 0;
  uint64_t visits_ = 0;
  bool empty_added_ = false;
};

}  // namespace flashq::grammar
