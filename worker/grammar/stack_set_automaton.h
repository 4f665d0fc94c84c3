// Sets of stacks as the states of a lazily built automaton: each distinct set gets an id and each
// (set, byte) transition is computed once. Walking all tokens from one grammar context meets the
// same few sets again and again (inside a string every ordinary character leads back to the same
// set), so most trie nodes cost one table lookup.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "worker/grammar/byte_stepper.h"

namespace flashq::grammar {

class StackSetAutomaton {
 public:
  static constexpr int32_t kDead = -1;  // the empty set: no byte can follow

  // `work_budget`: grammar positions the automaton may visit building its states; past it,
  // next() throws kInvalidArgument (a grammar so ambiguous that its masks would take minutes).
  StackSetAutomaton(ByteStepper& stepper, uint64_t work_budget)
      : stepper_(stepper), work_budget_(work_budget) {}

  int32_t intern(StackSet stacks);
  int32_t next(int32_t state, uint8_t byte);
  // Whether some stack of `state` has nothing left (the context below it must take over).
  bool reaches_bottom(int32_t state) const { return reaches_bottom_[state]; }

 private:
  ByteStepper& stepper_;
  uint64_t work_budget_;
  std::map<StackSet, int32_t> ids_;
  std::vector<StackSet> sets_;
  std::vector<bool> reaches_bottom_;
  std::vector<std::array<int32_t, 256>> next_;  // -2: not computed yet
  StackSet scratch_;
};

}  // namespace flashq::grammar
