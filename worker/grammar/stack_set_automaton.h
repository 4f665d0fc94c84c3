// Sets of stacks as the states of a lazily built automaton: each distinct set gets an id and each
// (set, byte) transition is computed once. Walking all tokens from one grammar context meets the
// same few sets again and again (inside a string every ordinary character leads back to the same
// set), so most trie nodes cost one table lookup.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
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
  // Inline: a trie walk calls this once per node, and nearly every call is a table lookup.
  int32_t next(int32_t state, uint8_t byte) {
    int32_t known = next_[state][byte];
    return known != kUnknown ? known : compute_next(state, byte);
  }
  // Whether some stack of `state` has nothing left (the context below it must take over).
  bool reaches_bottom(int32_t state) const { return reaches_bottom_[state] != 0; }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t compute_next(int32_t state, uint8_t byte);

  ByteStepper& stepper_;
  uint64_t work_budget_;
  struct StackSetHash {
    size_t operator()(const StackSet& stacks) const {
      size_t h = stacks.size();
      for (int32_t s : stacks) h = (h ^ static_cast<uint32_t>(s)) * 0x9E3779B97F4A7C15ULL;
      return h;
    }
  };
  std::unordered_map<StackSet, int32_t, StackSetHash> ids_;
  std::vector<StackSet> sets_;
  std::vector<uint8_t> reaches_bottom_;
  std::vector<std::array<int32_t, 256>> next_;  // kUnknown: not computed yet
  StackSet scratch_;
};

}  // namespace flashq::grammar
