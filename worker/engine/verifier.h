// Verification (docs/dflash.md §2.4): one batched target pass over every sequence's block
// [x, d_1, ..., d_{B-1}] (causal, on top of its KV cache, capturing the proposer's tap layers),
// and of its logits what acceptance needs, brought to the host as cheaply as the batch allows:
// with every sequence greedy, each row's argmax only (4 bytes a row, not a vocabulary); where no
// sampling sequence verifies a draft, every row sampled on the backend (only ids again); else
// every row, for speculative sampling on the host. The verifier then decides each block's
// acceptance from those rows, and the first token after a prompt from the prefill's. A constrained
// sequence's rows come to the host and are masked (token_constraint.h), row j at the state its
// draft reaches after d_1..d_j; so do the rows of a sequence that asked for log-probabilities,
// which are taken from them before any mask.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/tensor.h"
#include "worker/engine/acceptance.h"
#include "worker/engine/row_argmax.h"
#include "worker/engine/row_sampler.h"
#include "worker/engine/sequence.h"
#include "worker/engine/sequence_step.h"
#include "worker/engine/token_logprobs.h"
#include "worker/engine/token_mask.h"
#include "worker/model/target_model.h"

namespace flashq {

class Verifier {
 public:
  // `sample_on_backend`: draw sampled rows on the backend (RowSampler) where no draft needs the
  // distribution on the host.
  Verifier(TargetModel& model, bool sample_on_backend)
      : model_(model), sample_on_backend_(sample_on_backend), mask_(model.config().vocab_size) {}

  struct Pass {
    Tensor taps;         // every block's rows in order; views into the model's workspace, valid
                         // until its next pass (undefined without tap layers)
    int64_t rows = 0;    // rows of all blocks together
    double seconds = 0;  // the forward and bringing its rows to the host
  };

  // Runs every step's block (each step's block_size >= 1 and its draft set) in one pass; sets
  // each step's block and first row.
  Pass verify(std::span<SequenceStep* const> steps, std::vector<int64_t> tap_layers);
  // What the target keeps of a step's draft, and its own next token, from the last pass.
  Acceptance accept(const SequenceStep& step);
  // The target's first token after a prompt, from the prefill pass's logits (one row).
  int32_t first_token(const Tensor& logits, Sequence& sequence);
  // The log-probabilities (token_logprobs.h) of the tokens a step of a sequence that asked for
  // them produced (d_1..d_a, then the bonus: row j gives token j), from the last pass.
  std::vector<TokenLogprobs> logprobs(const SequenceStep& step, std::span<const int32_t> produced) const;
  // Those of the first token, from the last first_token() of a sequence that asked for them.
  TokenLogprobs first_token_logprobs(int32_t token) const;

 private:
  // With every sequence greedy, each row's argmax (into choices_); else every row (into logits_,
  // and choices_ worked out here).
  void fetch_logits(const Tensor& logits, bool all_greedy);
  // Every row of the pass sampled on the backend (greedy rows: the argmax) into choices_.
  void sample_rows_on_backend(const Tensor& logits, std::span<SequenceStep* const> steps);
  // A constrained step's rows in logits_ masked along its draft, and their choices_ again; rows
  // after the first draft token the constraint forbids are left (acceptance stops before them).
  void mask_rows(const SequenceStep& step);
  // Each row of the step's block: its raw distribution's normaliser and top tokens.
  void keep_row_logprobs(const SequenceStep& step);

  TargetModel& model_;
  bool sample_on_backend_;
  bool sampled_on_backend_ = false;  // how the last pass's rows were drawn
  std::vector<float> logits_;
  std::vector<int32_t> choices_;  // the target's token for each row of the last pass
  RowArgmax row_argmax_;
  TokenMask mask_;
  std::vector<RowLogprobs> row_logprobs_;  // by row of the last pass, for sequences that asked
  RowSampler row_sampler_;
};

}  // namespace flashq
