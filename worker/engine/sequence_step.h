// One sequence's part in one decode step (docs/dflash.md §2.3-2.4), filled in role by role: the plan
// sets its block size, the proposer its draft, the verifier its block's rows in the target's
// pass, acceptance how much of the draft the target kept.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/engine/acceptance.h"
#include "worker/engine/proposer.h"
#include "worker/engine/sequence.h"

namespace flashq {

struct SequenceStep {
  Sequence* sequence = nullptr;

  // Plan.
  int64_t block_size = 0;     // B: 1 without a draft; 0 when the context is full (no pass)
  bool without_taps = false;  // `auto`, and no drafting could pay at this batch: no hidden states
  int64_t start = 0;          // committed tokens (the target KV length): the block's first position

  // The draft is a run of tokens the constraint forces (jump-forward), not the proposer's: it is
  // verified like a draft (and always accepted) but neither proposed nor counted as one.
  bool forced = false;

  // Propose (B >= 2).
  std::vector<int32_t> draft;              // d_1..d_{B-1}
  std::vector<DraftDistribution> draft_q;  // what each d_i was drawn from; empty: deterministic

  // Verify.
  std::vector<int32_t> block;  // [x, d_1, ..., d_{B-1}]: the rows the target runs
  int64_t first_row = 0;       // the block's first row in the pass's logits and taps

  // Accept.
  Acceptance acceptance;
};

}  // namespace flashq
