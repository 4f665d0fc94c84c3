// The plan of a decode step: each running sequence's block size B. A `dflash` sequence drafts its
// request's block (or the drafter's), an `auto` one what the policy chooses for the batch, one
// with spec `off` (or in an engine without a proposer) nothing (B = 1). Then B is clamped so that
// no step runs past max_tokens or the context, whose size the KV cache was made for (docs/dflash.md
// §2.4, Stops): a sequence whose context is full gets B = 0 and ends.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "worker/engine/proposer.h"
#include "worker/engine/sequence.h"
#include "worker/engine/sequence_step.h"
#include "worker/engine/spec_policy.h"

namespace flashq {

class StepPlanner {
 public:
  // `proposer` may be null (no speculation at all).
  StepPlanner(SpecPolicy& policy, const Proposer* proposer) : policy_(policy), proposer_(proposer) {}

  // Whether the sequence drafts at all (it then has proposer state).
  bool speculates(const Sequence& sequence) const;
  // An `auto` sequence in a batch of this size where no drafting could pay: the engine keeps no
  // hidden states for it (Proposer::observe_without_taps).
  bool out_of_drafting(const Sequence& sequence, int64_t batch) const;

  // One record per sequence, in order, with its block size; the batch is every unfinished
  // sequence (an `auto` sequence weighs drafting at that size).
  std::vector<SequenceStep> plan(std::span<Sequence* const> batch);

 private:
  // Before the clamps.
  int64_t chosen_block_size(Sequence& sequence, int64_t batch);

  SpecPolicy& policy_;
  const Proposer* proposer_;
};

}  // namespace flashq
