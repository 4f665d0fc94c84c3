#include "worker/engine/verifier.h"

#include <algorithm>
#include <array>
#include <chrono>

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

bool greedy(const SequenceStep* step) { return step->sequence->request.generation.sampling.greedy(); }
bool constrained(const SequenceStep* step) { return step->sequence->request.constraint != nullptr; }
bool wants_logprobs(const SequenceStep* step) { return step->sequence->request.generation.logprobs >= 0; }
// Rows that must reach the host whole.
bool needs_rows(const SequenceStep* step) { return constrained(step) || wants_logprobs(step); }

}  // namespace

Verifier::Pass Verifier::verify(std::span<SequenceStep* const> steps, std::vector<int64_t> tap_layers) {
  std::vector<SequenceChunk> chunks;
  int64_t rows = 0;
  for (SequenceStep* step : steps) {
    Sequence& s = *step->sequence;
    step->block.push_back(s.next_token);
    step->block.insert(step->block.end(), step->draft.begin(), step->draft.end());
    step->first_row = rows;
    rows += static_cast<int64_t>(step->block.size());
    chunks.push_back({step->block, &s.target_cache});
  }
  ForwardOptions forward{.logits = LogitRows::kAll};
  forward.tap_layers = std::move(tap_layers);

  const bool all_greedy = std::all_of(steps.begin(), steps.end(), greedy);
  const bool any_rows = std::any_of(steps.begin(), steps.end(), needs_rows);
  // Sampling sequences that verify a draft need their rows' distributions on the host, and so do
  // constrained ones and those that asked for log-probabilities; the others are sampled where the
  // logits are.
  sampled_on_backend_ = !all_greedy && sample_on_backend_ && !any_rows &&
                        std::all_of(steps.begin(), steps.end(),
                                    [](const SequenceStep* step) { return greedy(step) || step->block.size() == 1; });
  const auto start = Clock::now();
  ForwardOutput out = model_.forward(chunks, forward);
  if (sampled_on_backend_) {
    sample_rows_on_backend(out.logits, steps);
  } else {
    fetch_logits(out.logits, all_greedy && !any_rows);
    if (std::any_of(steps.begin(), steps.end(), wants_logprobs)) {
      row_logprobs_.assign(static_cast<size_t>(rows), RowLogprobs{});
    }
    for (const SequenceStep* step : steps) {
      if (wants_logprobs(step)) keep_row_logprobs(*step);  // before any mask
      if (constrained(step)) mask_rows(*step);
    }
  }
  return {out.taps, rows, std::chrono::duration<double>(Clock::now() - start).count()};
}

Acceptance Verifier::accept(const SequenceStep& step) {
  Sequence& s = *step.sequence;
  const std::span<const int32_t> draft = std::span<const int32_t>(step.block).subspan(1);
  const size_t row = static_cast<size_t>(step.first_row);
  const size_t rows = step.block.size();
  if (s.request.generation.sampling.greedy()) {
    return accept_longest_prefix(draft, std::span<const int32_t>(choices_).subspan(row, rows));
  }
  if (sampled_on_backend_) return {.accepted = 0, .bonus = choices_[row]};  // no draft: the token sampled there
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  return accept_speculative_sampling(draft, std::span<const float>(logits_).subspan(row * vocab, rows * vocab),
                                     static_cast<int64_t>(vocab), s.sampler, step.draft_q);
}

int32_t Verifier::first_token(const Tensor& logits, Sequence& s) {
  const SamplingParams& sampling = s.request.generation.sampling;
  TokenConstraint* constraint = s.request.constraint.get();
  const int32_t logprobs = s.request.generation.logprobs;
  if (!sampling.greedy() && sample_on_backend_ && !constraint && logprobs < 0) {
    return row_sampler_(model_.backend(), logits, RowSampler::params_for(sampling, s.sampler.uniform()))[0];
  }
  fetch_logits(logits, sampling.greedy() && !constraint && logprobs < 0);
  if (logprobs >= 0) row_logprobs_.assign(1, RowLogprobs::of(logits_, logprobs));
  if (constraint) {
    mask_.fill(*constraint, s.end_ids);
    mask_.apply(logits_);
    choices_[0] = argmax(logits_);
  }
  return sampling.greedy() ? choices_[0] : s.sampler.sample(logits_);
}

TokenLogprobs Verifier::first_token_logprobs(int32_t token) const {
  return row_logprobs_.at(0).for_token(logits_.at(static_cast<size_t>(token)));
}

std::vector<TokenLogprobs> Verifier::logprobs(const SequenceStep& step, std::span<const int32_t> produced) const {
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  std::vector<TokenLogprobs> out;
  for (size_t j = 0; j < produced.size(); ++j) {
    const size_t row = static_cast<size_t>(step.first_row) + j;
    out.push_back(row_logprobs_.at(row).for_token(logits_.at(row * vocab + static_cast<size_t>(produced[j]))));
  }
  return out;
}

void Verifier::keep_row_logprobs(const SequenceStep& step) {
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  const int32_t top = step.sequence->request.generation.logprobs;
  for (size_t j = 0; j < step.block.size(); ++j) {
    const size_t row = static_cast<size_t>(step.first_row) + j;
    row_logprobs_[row] = RowLogprobs::of(std::span<const float>(logits_.data() + row * vocab, vocab), top);
  }
}

void Verifier::mask_rows(const SequenceStep& step) {
  const Sequence& s = *step.sequence;
  TokenConstraint& constraint = *s.request.constraint;
  const std::vector<int32_t>& ends = s.end_ids;
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  int64_t advanced = 0;
  for (size_t j = 0; j < step.block.size(); ++j) {
    const size_t row = static_cast<size_t>(step.first_row) + j;
    const std::span<float> logits(logits_.data() + row * vocab, vocab);
    mask_.fill(constraint, ends);
    mask_.apply(logits);
    choices_[row] = argmax(logits);
    if (j + 1 == step.block.size()) break;
    // Row j+1 follows d_{j+1}: only where the constraint lets the output go on with it.
    const int32_t next = step.block[j + 1];
    if (!mask_.allows(next) || std::find(ends.begin(), ends.end(), next) != ends.end()) break;
    constraint.advance(next);
    ++advanced;
  }
  constraint.rollback(advanced);
}

void Verifier::sample_rows_on_backend(const Tensor& logits, std::span<SequenceStep* const> steps) {
  std::vector<float> params;
  for (const SequenceStep* step : steps) {
    Sequence& s = *step->sequence;
    const SamplingParams& sampling = s.request.generation.sampling;
    for (size_t r = 0; r < step->block.size(); ++r) {
      const std::array<float, 4> row = RowSampler::params_for(sampling, sampling.greedy() ? 0.0 : s.sampler.uniform());
      params.insert(params.end(), row.begin(), row.end());
    }
  }
  choices_ = row_sampler_(model_.backend(), logits, params);
}

void Verifier::fetch_logits(const Tensor& logits, bool all_greedy) {
  Backend& backend = model_.backend();
  if (all_greedy) {
    choices_ = row_argmax_(backend, logits);
    return;
  }
  logits_.resize(static_cast<size_t>(logits.numel()));
  backend.copy_to_host(logits, logits_.data());
  const size_t vocab = static_cast<size_t>(logits.cols());
  choices_.resize(static_cast<size_t>(logits.rows()));
  for (size_t m = 0; m < choices_.size(); ++m) {
    choices_[m] = argmax(std::span<const float>(logits_.data() + m * vocab, vocab));
  }
}

}  // namespace flashq
