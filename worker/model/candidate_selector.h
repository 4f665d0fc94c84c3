// DFlash2's candidate selector (docs/dflash.md §7.3): rather than each draft position's argmax,
// it keeps the drafter's top-K tokens at every position and walks the block from the anchor (the
// last committed token), choosing at position i among its candidates by
//
//     score_i(k) = unary_i(k) + < A[prev] * (W h_i), B[cand_i(k)] >
//
// where unary is the drafter's (multiplied, soft-capped) logit, h_i the drafter's final hidden
// row, W the hidden projection, A and B the predecessor and successor codebooks (rank R) and prev
// the token chosen at i - 1 (the anchor for i = 0). Greedy takes the best score (the earlier
// candidate on ties); at temperature T it draws from q_i = softmax(score_i / T) by inverse CDF
// with a uniform the caller gives, and returns q_i so that verification can be exact.
//
// The pair terms for every (candidate at i - 1, candidate at i) are computed on the backend in one
// call (Backend::selector_pair_scores); only the walk, K scores a position, runs on the host.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/drafter_config.h"
#include "worker/model/safetensors.h"
#include "worker/model/workspace.h"

namespace flashq {

// One block's walk: its anchor, its draft rows (B - 1, consecutive in the logits), and how to
// choose: temperature 0 is greedy; else one uniform in [0, 1) per row.
struct SelectorBlock {
  int32_t anchor;
  int64_t rows;
  float temperature;
  std::span<const double> uniforms;
};

// What a block's walk chose, and (sampled only) q over each row's candidates.
struct SelectorDraft {
  std::vector<int32_t> tokens;      // [rows]
  std::vector<int32_t> candidates;  // [rows * K], each row's in descending logit order
  std::vector<float> q;             // [rows * K]; empty when greedy
};

class CandidateSelector {
 public:
  // Tensors candidate_selector.hidden_projection.weight [R, H] and the codebooks [V, R], named
  // candidate_selector.{predecessor,successor}_codebook (as z-lab stores them) or with .weight.
  CandidateSelector(const WeightStore& weights, const DrafterConfig& config, Backend& backend);

  // hidden [rows, H] (the drafter's final-normed draft rows) and logits [rows, V] (its LM head's,
  // before output_multiplier and soft-capping), blocks covering the rows in order.
  std::vector<SelectorDraft> select(const Tensor& hidden, const Tensor& logits, std::span<const SelectorBlock> blocks);

  // The scores of the last select(), [rows, K], of the candidates each walk could choose from.
  const std::vector<float>& last_scores() const { return scores_; }

 private:
  // Walks one block's rows from `first_row` with the unary values and pair terms on the host.
  SelectorDraft walk(const SelectorBlock& block, int64_t first_row);

  const DrafterConfig& config_;
  Backend& backend_;
  Workspace workspace_;
  int64_t top_k_;
  Tensor hidden_projection_, predecessor_codebook_, successor_codebook_;
  std::vector<float> unary_, pairs_, scores_;
  std::vector<int32_t> candidates_;
};

}  // namespace flashq
