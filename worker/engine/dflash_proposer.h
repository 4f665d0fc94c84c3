// The DFlash drafter as a proposer: committed tokens are injected into the sequence's draft
// context cache lazily, just before the sequence next drafts; proposing runs one pass over all
// blocks and takes the argmax of rows 1..B-1 (docs/dflash.md §2.3), or, for a DFlash2 drafter,
// the candidate selector's walk, sampled at the sequence's temperature with q handed on for an
// exact verification (§7). Which one is the drafter's checkpoint's choice.
//
// A sequence that `auto` keeps from drafting would otherwise pay an injection per committed
// token for a drafter it does not use (6% of a decode step for the demo pair). Instead only the
// taps of its latest kRecentRows tokens are kept; older ones are dropped, and its draft context
// skips their positions: when it drafts again (a probe), the drafter sees the prompt, what was
// injected while it drafted, and the recent text. Sequences that draft every step lose nothing.
// Where drafting cannot pay at the batch size, the engine keeps no taps at all for an `auto`
// sequence (observe_without_taps; docs/decisions.md, "No taps where drafting cannot pay").
#pragma once

#include <memory>

#include "worker/engine/proposer.h"
#include "worker/engine/row_argmax.h"
#include "worker/engine/token_mask.h"
#include "worker/model/dflash_drafter.h"

namespace flashq {

struct DraftContext;

class DFlashProposer final : public Proposer {
 public:
  // Taps of committed tokens kept per sequence until it drafts (memory: kRecentRows x taps x
  // hidden floats per sequence); a sequence that does not draft keeps only its latest ones.
  static constexpr int64_t kRecentRows = 16;

  explicit DFlashProposer(DFlashDrafter& drafter) : drafter_(drafter) {}

  int64_t max_block_size() const override { return drafter_.config().block_size; }
  std::vector<int64_t> tap_layers() const override { return drafter_.config().target_layer_ids; }
  std::unique_ptr<ProposerState> start_sequence(int64_t max_length) override;
  int64_t pooled_bytes(int64_t max_length) const override;
  // Draft context caches come whole from `pool` from now on (null: grown on demand).
  void use_cache_pool(CachePool* pool) { pool_ = pool; }
  void observe(std::span<const Observation> observations) override;
  // The ring is emptied (its rows would sit before a gap) and the draft context skips these
  // positions, as it skips dropped taps.
  void observe_without_taps(std::span<const Observation> observations) override;
  void catch_up(std::span<const ProposalRequest> requests) override;
  void propose(std::span<const ProposalRequest> requests) override;
  int64_t ordered_context(ProposerState* state) override;
  void export_context_block(ProposerState* state, int64_t first_position, PagedKvStore& store, BlockId id) override;
  int64_t import_context_blocks(ProposerState* state, PagedKvStore& store, std::span<const BlockId> blocks) override;

  // Drafts need only each row's argmax, which the backend works out, so only ids reach the
  // host; keep_logits(true) also copies the drafter's logits, for last_logits() (a reference
  // check; on a GPU it moves a vocabulary of floats a row).
  void keep_logits(bool keep) { keep_logits_ = keep; }
  // The drafter logits of the last propose() (with keep_logits): rows 1..B-1 of each block, in
  // request order.
  const std::vector<float>& last_logits() const { return logits_; }
  // The candidate selector's scores of the last propose() (DFlash2; empty otherwise): [rows, K].
  const std::vector<float>& last_selector_scores() const {
    static const std::vector<float> none;
    return drafter_.selector() ? drafter_.selector()->last_scores() : none;
  }

 private:
  void inject_recent(std::span<DraftContext* const> contexts);
  // DFlash: each row's argmax (a constrained sequence's masked). DFlash2: the candidate
  // selector's walk, with q for a sampling sequence (docs/dflash.md §7).
  void choose_by_argmax(std::span<const ProposalRequest> requests, const Tensor& logits);
  void choose_by_selector(std::span<const ProposalRequest> requests, const Tensor& logits);
  // A constrained request's draft from its rows of logits_, starting at `first_row`.
  void choose_constrained(const ProposalRequest& r, size_t first_row, int64_t vocab);

  DFlashDrafter& drafter_;
  CachePool* pool_ = nullptr;
  bool keep_logits_ = false;
  std::vector<float> logits_;        // with keep_logits, or for constrained drafts
  std::unique_ptr<TokenMask> mask_;  // made when a constrained sequence first drafts
  RowArgmax row_argmax_;
};

}  // namespace flashq
