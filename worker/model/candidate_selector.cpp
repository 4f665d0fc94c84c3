#include "worker/model/candidate_selector.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "shared/error.h"
#include "worker/model/decoder_layer.h"

namespace flashq {
namespace {

// z-lab stores the codebooks as bare names; a copy written through an nn.Embedding adds .weight.
Tensor load_codebook(const WeightStore& weights, const std::string& name, const Shape& shape, Backend& backend) {
  const std::string bare = "candidate_selector." + name;
  return load_weight(weights, weights.contains(bare) ? bare : bare + ".weight", shape, backend);
}

}  // namespace

CandidateSelector::CandidateSelector(const WeightStore& weights, const DrafterConfig& config, Backend& backend)
    : config_(config), backend_(backend), workspace_(backend), top_k_(config.dflash2->selector_top_k) {
  const int64_t rank = config.dflash2->selector_rank, vocab = config.layers.vocab_size;
  hidden_projection_ =
      load_weight(weights, "candidate_selector.hidden_projection.weight", {rank, config.layers.hidden_size}, backend);
  predecessor_codebook_ = load_codebook(weights, "predecessor_codebook", {vocab, rank}, backend);
  successor_codebook_ = load_codebook(weights, "successor_codebook", {vocab, rank}, backend);
}

std::vector<SelectorDraft> CandidateSelector::select(const Tensor& hidden, const Tensor& logits,
                                                     std::span<const SelectorBlock> blocks) {
  const int64_t rows = hidden.dim(0), k = top_k_, rank = hidden_projection_.dim(0);
  Tensor values = workspace_.get("selector_values", DType::kF32, {rows, k});
  Tensor ids = workspace_.get("selector_ids", DType::kI32, {rows, k});
  backend_.top_k(logits, values, ids);
  unary_.resize(static_cast<size_t>(rows * k));
  candidates_.resize(static_cast<size_t>(rows * k));
  backend_.copy_to_host(values, unary_.data());
  backend_.copy_to_host(ids, candidates_.data());
  // The multiplier and the cap keep the logits' order: the top-k of the raw logits are theirs.
  for (float& u : unary_) u = drafter_logit(config_, u);

  // Each row's K possible predecessors: the anchor (row 0 of a block: one, repeated) or the
  // candidates of the row before.
  std::vector<int32_t> predecessors;
  predecessors.reserve(static_cast<size_t>(rows * k));
  int64_t row = 0;
  for (const SelectorBlock& block : blocks) {
    for (int64_t i = 0; i < block.rows; ++i, ++row) {
      for (int64_t p = 0; p < k; ++p) {
        predecessors.push_back(i == 0 ? block.anchor : candidates_[static_cast<size_t>((row - 1) * k + p)]);
      }
    }
  }
  check_invariant(row == rows, "selector blocks cover the draft rows");
  const Tensor predecessor_ids = workspace_.upload_int32s("selector_predecessors", {predecessors})[0];
  Tensor projected = workspace_.get("selector_projected", DType::kF32, {rows, rank});
  Tensor a = workspace_.get("selector_a", DType::kF32, {rows * k, rank});
  Tensor b = workspace_.get("selector_b", DType::kF32, {rows * k, rank});
  Tensor pairs = workspace_.get("selector_pairs", DType::kF32, {rows, k, k});
  backend_.matmul(hidden, hidden_projection_, projected);
  backend_.embedding(predecessor_codebook_, predecessor_ids, a);
  backend_.embedding(successor_codebook_, ids.reshape({rows * k}), b);
  backend_.selector_pair_scores(a, projected, b, pairs);
  pairs_.resize(static_cast<size_t>(rows * k * k));
  backend_.copy_to_host(pairs, pairs_.data());

  scores_.assign(static_cast<size_t>(rows * k), 0.0f);
  std::vector<SelectorDraft> drafts;
  row = 0;
  for (const SelectorBlock& block : blocks) {
    drafts.push_back(walk(block, row));
    row += block.rows;
  }
  return drafts;
}

SelectorDraft CandidateSelector::walk(const SelectorBlock& block, int64_t first_row) {
  const auto k = static_cast<size_t>(top_k_);
  const bool sampled = block.temperature > 0.0f;
  check_invariant(!sampled || static_cast<int64_t>(block.uniforms.size()) >= block.rows, "a uniform per sampled row");
  SelectorDraft draft;
  draft.candidates.assign(candidates_.begin() + first_row * top_k_,
                          candidates_.begin() + (first_row + block.rows) * top_k_);
  size_t previous = 0;  // the anchor's pair terms sit in every predecessor slot of row 0
  for (int64_t i = 0; i < block.rows; ++i) {
    const size_t row = static_cast<size_t>(first_row + i);
    float* scores = scores_.data() + row * k;
    for (size_t c = 0; c < k; ++c) scores[c] = unary_[row * k + c] + pairs_[(row * k + previous) * k + c];
    size_t chosen = 0;
    if (!sampled) {
      for (size_t c = 1; c < k; ++c) chosen = scores[c] > scores[chosen] ? c : chosen;  // the earlier on ties
    } else {
      // q = softmax(scores / T), drawn by inverse CDF in candidate order.
      const float top = *std::max_element(scores, scores + k);
      std::vector<double> weights(k);
      double total = 0.0;
      for (size_t c = 0; c < k; ++c) total += weights[c] = std::exp((scores[c] - top) / block.temperature);
      double cumulative = 0.0;
      chosen = k - 1;
      bool found = false;
      for (size_t c = 0; c < k; ++c) {
        draft.q.push_back(static_cast<float>(weights[c] / total));
        cumulative += weights[c] / total;
        if (!found && block.uniforms[static_cast<size_t>(i)] < cumulative) chosen = c, found = true;
      }
    }
    draft.tokens.push_back(candidates_[row * k + chosen]);
    previous = chosen;
  }
  return draft;
}

}  // namespace flashq
