// The DFlash drafter as a proposer: committed tokens are injected into the sequence's draft
// context cache (lazily: just before the sequence next drafts, or when kPendingRows wait);
// proposing runs one non-causal pass over all blocks and takes the argmax of rows 1..B-1
// (DFLASH.md §2.3).
#pragma once

#include "worker/engine/proposer.h"
#include "worker/model/dflash_drafter.h"

namespace flashq {

struct DraftContext;

class DFlashProposer final : public Proposer {
 public:
  // Committed tokens held back per sequence before they are injected anyway (bounds memory:
  // kPendingRows x taps x hidden floats per sequence).
  static constexpr int64_t kPendingRows = 64;

  explicit DFlashProposer(DFlashDrafter& drafter) : drafter_(drafter) {}

  int64_t max_block_size() const override { return drafter_.config().block_size; }
  std::vector<int64_t> tap_layers() const override { return drafter_.config().target_layer_ids; }
  std::unique_ptr<ProposerState> start_sequence(int64_t max_length) override;
  void observe(std::span<const Observation> observations) override;
  void propose(std::span<const ProposalRequest> requests) override;

  // The drafter logits of the last propose(): rows 1..B-1 of each block, in request order.
  const std::vector<float>& last_logits() const { return logits_; }

 private:
  void inject_pending(std::span<DraftContext* const> contexts);

  DFlashDrafter& drafter_;
  std::vector<float> logits_;
};

}  // namespace flashq
