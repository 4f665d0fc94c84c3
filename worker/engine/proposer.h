// A proposer drafts the next tokens of a sequence for the target to verify (docs/architecture.md). The
// DFlash drafter is one; tests use a double that replays a known continuation.
//
// Protocol, per sequence: start_sequence once; observe every run of committed tokens, in order,
// with the target's hidden states at the proposer's tap layers; propose a block whenever the
// engine speculates. Positions are absolute: the first prompt token is position 0.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/tensor.h"
#include "worker/engine/sampler.h"
#include "worker/engine/token_constraint.h"
#include "worker/model/paged_kv_store.h"

namespace flashq {

// Whatever a proposer keeps per sequence (the DFlash draft context cache).
class ProposerState {
 public:
  virtual ~ProposerState() = default;
};

struct Observation {
  ProposerState* state;
  std::span<const int32_t> tokens;  // newly committed tokens, at positions first_position ...
  int64_t first_position;
  Tensor taps;  // [tokens.size(), tap_layers().size() * target_hidden] (undefined if no taps)
};

// The distribution a draft token was drawn from, over the tokens it could have been (DFlash2's
// selector: its candidates, docs/dflash.md §7.4); verification accepts and resamples with it.
// A proposer that drafts deterministically leaves the draft's list of these empty.
struct DraftDistribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;  // q(ids[i]), summing to 1
};

struct ProposalRequest {
  ProposerState* state;
  int32_t last_token;           // chosen by the target, not yet run through it; at position `start`
  int64_t start;                // number of committed tokens
  int64_t block_size;           // the draft has block_size - 1 tokens, for positions start+1 ...
  std::vector<int32_t>* draft;  // output
  // The sequence's constraint (token_constraint.h), at its state after last_token: the draft
  // must keep to it position by position; null: none. `end_ids` end the output where allowed.
  TokenConstraint* constraint = nullptr;
  std::span<const int32_t> end_ids;
  // A proposer that samples its draft (DFlash2's selector at temperature > 0) draws with
  // `sampler` at `temperature` and sets one DraftDistribution per draft token; else leaves it
  // empty. Null: the draft is deterministic.
  std::vector<DraftDistribution>* draft_q = nullptr;
  float temperature = 0.0f;
  Sampler* sampler = nullptr;
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  virtual int64_t max_block_size() const = 0;
  // Target layers whose residual stream the proposer needs in observe().
  virtual std::vector<int64_t> tap_layers() const = 0;
  // Null when the proposer's memory cannot hold another sequence now (a cache pool that is full):
  // the engine admits the sequence later.
  virtual std::unique_ptr<ProposerState> start_sequence(int64_t max_length) = 0;
  // Device bytes start_sequence takes from a cache pool for a sequence of max_length positions
  // (0: none), so that the engine refuses a sequence no pool could ever hold.
  virtual int64_t pooled_bytes(int64_t /*max_length*/) const { return 0; }
  virtual void observe(std::span<const Observation> observations) = 0;
  // Committed tokens observed without hidden states (`taps` undefined): the engine captures none
  // for an `auto` sequence while drafting could not pay at the batch size. The proposer drafts
  // without them later; by default they are observed like any others.
  virtual void observe_without_taps(std::span<const Observation> observations) { observe(observations); }
  // Work on committed tokens that the proposer deferred (DFlash's lazy injection), done before
  // propose() so that the engine times drafting apart from it: that work is owed per committed
  // token whether the sequence drafts now or later, so it must not make drafting look dear.
  // propose() catches up by itself when this was not called.
  virtual void catch_up(std::span<const ProposalRequest> /*requests*/) {}
  virtual void propose(std::span<const ProposalRequest> requests) = 0;

  // ---- its context kept beside a paged cache's blocks (paged_kv_store.h; default: none) ----
  // Positions [0, n) whose context the proposer holds row for position (none skipped), after
  // catching up on every committed one.
  virtual int64_t ordered_context(ProposerState* /*state*/) { return 0; }
  // Copies the context rows of positions [first_position, + block size) into block `id` of the
  // store's drafter rows.
  virtual void export_context_block(ProposerState* /*state*/, int64_t /*first_position*/, PagedKvStore& /*store*/,
                                    BlockId /*id*/) {}
  // A state that has observed nothing starts with the drafter rows of `blocks` (positions [0,
  // blocks.size() * block size)); returns the positions it took (0: none, observe from 0).
  virtual int64_t import_context_blocks(ProposerState* /*state*/, PagedKvStore& /*store*/,
                                        std::span<const BlockId> /*blocks*/) {
    return 0;
  }
};

}  // namespace flashq
