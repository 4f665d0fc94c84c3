#include "worker/engine/step_plan.h"

#include <algorithm>

namespace flashq {

bool StepPlanner::speculates(const Sequence& s) const {
  return proposer_ != nullptr && s.request.spec != SpecMode::kOff;
}

bool StepPlanner::out_of_drafting(const Sequence& s, int64_t batch) const {
  return s.proposer_state && s.request.spec == SpecMode::kAuto && !policy_.drafting_could_pay(batch);
}

int64_t StepPlanner::chosen_block_size(Sequence& s, int64_t batch) {
  if (!speculates(s)) return 1;
  const int64_t max_block = s.request.block_size > 0 ? s.request.block_size : proposer_->max_block_size();
  if (s.request.spec == SpecMode::kDflash) return max_block;
  return std::min(max_block, policy_.choose(s.spec_state, batch));
}

std::vector<SequenceStep> StepPlanner::plan(std::span<Sequence* const> batch) {
  const int64_t batch_size = static_cast<int64_t>(batch.size());
  std::vector<SequenceStep> steps(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence& s = *batch[i];
    SequenceStep& step = steps[i];
    const int64_t remaining = s.request.generation.max_tokens - static_cast<int64_t>(s.output.size());
    const int64_t room = s.target_cache.max_length() - s.target_cache.length();
    const int64_t chosen = chosen_block_size(s, batch_size);
    step.sequence = &s;
    step.without_taps = chosen == 1 && out_of_drafting(s, batch_size);
    step.block_size = std::max<int64_t>(std::min({chosen, remaining, room}), 0);
    step.start = s.target_cache.length();
  }
  return steps;
}

}  // namespace flashq
