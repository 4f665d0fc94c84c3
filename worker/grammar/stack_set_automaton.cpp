#include "worker/grammar/stack_set_automaton.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace flashq::grammar {

int32_t StackSetAutomaton::intern(StackSet stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  auto [it, inserted] = ids_.emplace(stacks, static_cast<int32_t>(sets_.size()));
  if (!inserted) return it->second;
  reaches_bottom_.push_back(stacks.front() == kEmptyStack);
  sets_.push_back(std::move(stacks));
  std::array<int32_t, 256> unknown;
  unknown.fill(kUnknown);
  next_.push_back(unknown);
  return it->second;
}

int32_t StackSetAutomaton::compute_next(int32_t state, uint8_t byte) {
  stepper_.advance(sets_[state], byte, scratch_);
  if (stepper_.visits() > work_budget_) {
    throw Error(ErrorCode::kInvalidArgument,
                "grammar too ambiguous: its token masks need more than " + std::to_string(work_budget_) +
                    " expansion steps");
  }
  int32_t id = intern(scratch_);
  next_[state][byte] = id;
  return id;
}

}  // namespace flashq::grammar
