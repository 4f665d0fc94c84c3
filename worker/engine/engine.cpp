#include "worker/engine/engine.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "shared/error.h"
#include "worker/engine/acceptance.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

bool contains(const std::vector<int32_t>& ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

}  // namespace

Engine::Engine(Qwen3Model& model, const Tokenizer& tokenizer, Proposer* proposer, EngineOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      proposer_(proposer),
      options_(std::move(options)),
      policy_(proposer ? proposer->max_block_size() : 1),
      sample_on_backend_(options_.sample_on_backend.value_or(model.backend().device() != Device::kCpu)) {
  if (options_.max_slots <= 0) throw Error(ErrorCode::kInvalidArgument, "the engine needs at least one slot");
}

Engine::~Engine() = default;

void Engine::add(uint64_t id, SequenceRequest request) {
  const ModelConfig& config = model_.config();
  const GenerationRequest& g = request.generation;
  const int64_t prompt_length = static_cast<int64_t>(g.prompt_tokens.size());
  if (prompt_length == 0) throw Error(ErrorCode::kInvalidArgument, "the prompt is empty");
  if (prompt_length >= config.max_position_embeddings) {
    throw Error(ErrorCode::kInvalidArgument, "prompt of " + std::to_string(prompt_length) +
                                                 " tokens does not fit the model's context of " +
                                                 std::to_string(config.max_position_embeddings));
  }
  if (g.max_tokens <= 0) throw Error(ErrorCode::kInvalidArgument, "max_tokens must be positive");
  for (int32_t token : g.prompt_tokens) {
    if (token < 0 || token >= config.vocab_size) {
      throw Error(ErrorCode::kInvalidArgument, "prompt token id " + std::to_string(token) + " is outside the vocabulary");
    }
  }
  validate_sampling(g.sampling);
  if (request.resume.tokens < 0 || request.resume.tokens > prompt_length) {
    throw Error(ErrorCode::kInvalidArgument, "the resumed output must be part of the prompt");
  }
  if (request.spec == SpecMode::kDflash && !proposer_) {
    throw Error(ErrorCode::kInvalidArgument, "spec 'dflash' needs a drafter, and this engine has none");
  }
  const int64_t max_block = proposer_ ? proposer_->max_block_size() : 1;
  if (request.block_size < 0 || request.block_size > max_block || request.block_size == 1) {
    throw Error(ErrorCode::kInvalidArgument, "block_size must be between 2 and " + std::to_string(max_block) +
                                                 " (0: the drafter's own)");
  }
  KvCache cache = model_.make_cache(prompt_length + g.max_tokens);
  if (options_.cache_pool) {
    const bool drafts = proposer_ && request.spec != SpecMode::kOff;
    const int64_t need = CachePool::footprint(cache.whole_bytes()) +
                         (drafts ? CachePool::footprint(proposer_->pooled_bytes(cache.max_length())) : 0);
    if (need > options_.cache_pool->capacity_bytes()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "prompt and max_tokens (" + std::to_string(cache.max_length()) + " positions) need " +
                      std::to_string(need) + " bytes of KV cache; this worker's cache pool holds " +
                      std::to_string(options_.cache_pool->capacity_bytes()));
    }
  }
  waiting_.push_back(std::make_unique<Sequence>(id, std::move(request), std::move(cache), tokenizer_));
}

void Engine::cancel(uint64_t id) {
  for (auto& s : running_) {
    if (s->id == id) s->cancelled = true;
  }
  for (auto& s : waiting_) {
    if (s->id == id) s->cancelled = true;
  }
}

bool Engine::speculates(const Sequence& sequence) const {
  return proposer_ != nullptr && sequence.request.spec != SpecMode::kOff;
}

void Engine::step() {
  for (auto& s : running_) {
    if (s->cancelled && !s->finish_reason) {
      StepEvent event{.id = s->id};
      finish(*s, FinishReason::kCancelled, event);
      if (options_.on_event) options_.on_event(event);
    }
  }
  admit();
  decode_step();
  retire();
}

void Engine::run_until_idle() {
  while (!idle()) step();
}

void Engine::admit() {
  // The batch these sequences join (an `auto` sequence weighs drafting at that size).
  const int64_t batch = std::min<int64_t>(options_.max_slots, static_cast<int64_t>(running_.size() + waiting_.size()));
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_slots) {
    if (!waiting_.front()->cancelled && !take_caches(*waiting_.front())) {
      // add() refused what an empty pool could not hold: with nothing running, this is a bug.
      check_invariant(!running_.empty(), "a sequence's caches fit an empty cache pool");
      break;  // it waits, first in line, for running sequences to give memory back
    }
    std::unique_ptr<Sequence> sequence = std::move(waiting_.front());
    waiting_.pop_front();
    if (sequence->cancelled) {
      StepEvent event{.id = sequence->id};
      finish(*sequence, FinishReason::kCancelled, event);
      if (options_.on_event) options_.on_event(event);
    } else {
      prefill(*sequence, batch);
    }
    running_.push_back(std::move(sequence));
  }
}

bool Engine::take_caches(Sequence& s) {
  if (options_.cache_pool && !s.target_cache.take_whole(*options_.cache_pool)) return false;
  if (speculates(s)) {
    s.proposer_state = proposer_->start_sequence(s.target_cache.max_length());
    if (!s.proposer_state) {
      s.target_cache.release();
      return false;
    }
  }
  return true;
}

// One pass per prompt, so a sequence's numbers never depend on what it was admitted with.
void Engine::prefill(Sequence& s, int64_t batch) {
  const auto start = Clock::now();
  const std::vector<int32_t>& prompt = s.request.generation.prompt_tokens;
  const bool observe = speculates(s);
  // An `auto` sequence joining a batch where no drafting could pay keeps no hidden states of its
  // prompt (their injection costs a tenth of the prefill); were it to draft later, its drafter
  // would see only the tokens since.
  const bool taps = observe && !out_of_drafting(s, batch);

  SequenceChunk chunk{prompt, &s.target_cache};
  ForwardOptions forward{.logits = LogitRows::kLastOfEachChunk};
  if (taps) forward.tap_layers = proposer_->tap_layers();
  ForwardOutput out = model_.forward({&chunk, 1}, forward);
  const SamplingParams& sampling = s.request.generation.sampling;
  int32_t first = 0;
  if (!sampling.greedy() && sample_on_backend_) {
    first = row_sampler_(model_.backend(), out.logits, RowSampler::params_for(sampling, s.sampler.uniform()))[0];
  } else {
    fetch_logits(out.logits, sampling.greedy());
    first = sampling.greedy() ? choices_[0] : s.sampler.sample(logits_);
  }
  if (observe) {
    Observation o{s.proposer_state.get(), prompt, 0, taps ? out.taps : Tensor()};
    if (taps) {
      proposer_->observe({&o, 1});
    } else {
      proposer_->observe_without_taps({&o, 1});
    }
  }
  phases_.prefill += seconds_since(start);

  s.first_token_at = Clock::now();
  StepEvent event{.id = s.id};
  s.next_token = first;
  emit(s, {&first, 1}, event);
  if (options_.on_event) options_.on_event(event);
}

bool Engine::out_of_drafting(const Sequence& s, int64_t batch) const {
  return s.proposer_state && s.request.spec == SpecMode::kAuto && !policy_.drafting_could_pay(batch);
}

int64_t Engine::block_size_for(Sequence& s, int64_t batch) {
  if (!speculates(s)) return 1;
  const int64_t max_block = s.request.block_size > 0 ? s.request.block_size : proposer_->max_block_size();
  if (s.request.spec == SpecMode::kDflash) return max_block;
  return std::min(max_block, policy_.choose(s.spec_state, batch));
}

void Engine::decode_step() {
  std::vector<Sequence*> batch;
  for (auto& s : running_) {
    if (!s->finish_reason) batch.push_back(s.get());
  }
  if (batch.empty()) return;
  auto other_start = Clock::now();

  // Block sizes, clamped so no step runs past max_tokens or the context.
  std::vector<int64_t> blocks;
  std::vector<std::vector<int32_t>> drafts(batch.size());
  std::vector<ProposalRequest> proposals;
  std::vector<char> without_taps(batch.size(), 0);  // auto, and no drafting could pay
  const int64_t batch_size = static_cast<int64_t>(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence& s = *batch[i];
    const int64_t remaining = s.request.generation.max_tokens - static_cast<int64_t>(s.output.size());
    const int64_t room = s.target_cache.max_length() - s.target_cache.length();
    const int64_t chosen = block_size_for(s, batch_size);
    without_taps[i] = chosen == 1 && out_of_drafting(s, batch_size);
    int64_t b = std::min({chosen, remaining, room});
    blocks.push_back(std::max<int64_t>(b, 0));
    if (b >= 2) {
      proposals.push_back({s.proposer_state.get(), s.next_token, s.target_cache.length(), b, &drafts[i]});
    }
  }
  std::vector<Sequence*> active;
  std::vector<char> active_without_taps;
  std::vector<SequenceChunk> chunks;
  std::vector<std::vector<int32_t>> block_tokens(batch.size());
  bool want_taps = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (blocks[i] == 0) {  // the context is full
      StepEvent event{.id = batch[i]->id};
      finish(*batch[i], FinishReason::kLength, event);
      if (options_.on_event) options_.on_event(event);
    }
  }
  phases_.other += seconds_since(other_start);

  if (!proposals.empty()) {
    const auto catch_up_start = Clock::now();
    proposer_->catch_up(proposals);
    phases_.draft += seconds_since(catch_up_start);
    const auto start = Clock::now();
    proposer_->propose(proposals);
    int64_t rows = 0;
    for (const ProposalRequest& p : proposals) rows += p.block_size;
    const double seconds = seconds_since(start);
    phases_.draft += seconds;
    policy_.record_draft_pass(rows, options_.draft_pass_timer ? options_.draft_pass_timer(rows, seconds) : seconds);
  }

  other_start = Clock::now();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (blocks[i] == 0) continue;
    block_tokens[i].push_back(batch[i]->next_token);
    block_tokens[i].insert(block_tokens[i].end(), drafts[i].begin(), drafts[i].end());
    chunks.push_back({block_tokens[i], &batch[i]->target_cache});
    active.push_back(batch[i]);
    active_without_taps.push_back(without_taps[i]);
    want_taps = want_taps || (batch[i]->proposer_state != nullptr && !without_taps[i]);
  }
  if (chunks.empty()) return;
  ForwardOptions forward{.logits = LogitRows::kAll};
  if (want_taps) forward.tap_layers = proposer_->tap_layers();
  phases_.other += seconds_since(other_start);

  const bool all_greedy = std::all_of(active.begin(), active.end(), [](const Sequence* s) {
    return s->request.generation.sampling.greedy();
  });
  // Sampling sequences that verify a draft need their rows' distributions on the host; the others
  // are sampled where the logits are.
  bool sample_here = !all_greedy && sample_on_backend_;
  for (size_t i = 0; i < active.size() && sample_here; ++i) {
    sample_here = active[i]->request.generation.sampling.greedy() || chunks[i].tokens.size() == 1;
  }
  const auto verify_start = Clock::now();
  ForwardOutput out = model_.forward(chunks, forward);
  if (sample_here) {
    sample_on_backend(out.logits, active, chunks);
  } else {
    fetch_logits(out.logits, all_greedy);
  }
  int64_t total_rows = 0;
  for (const SequenceChunk& c : chunks) total_rows += static_cast<int64_t>(c.tokens.size());
  const double verify_seconds = seconds_since(verify_start);
  phases_.verify += verify_seconds;
  policy_.record_target_pass(
      total_rows, options_.target_pass_timer ? options_.target_pass_timer(total_rows, verify_seconds) : verify_seconds);

  other_start = Clock::now();
  const int64_t vocab = model_.config().vocab_size;
  std::vector<Observation> observations, observations_without_taps;
  int64_t row = 0;
  for (size_t i = 0; i < active.size(); ++i) {
    Sequence& s = *active[i];
    const std::span<const int32_t> block = chunks[i].tokens;
    const int64_t b = static_cast<int64_t>(block.size());
    const std::span<const int32_t> draft = block.subspan(1);
    Acceptance acceptance;
    if (s.request.generation.sampling.greedy()) {
      acceptance = accept_longest_prefix(
          draft, std::span<const int32_t>(choices_).subspan(static_cast<size_t>(row), static_cast<size_t>(b)));
    } else if (sample_here) {
      acceptance.bonus = choices_[static_cast<size_t>(row)];  // no draft: the token sampled on the backend
    } else {
      acceptance = accept_speculative_sampling(
          draft, std::span<const float>(logits_.data() + row * vocab, static_cast<size_t>(b * vocab)), vocab,
          s.sampler);
    }
    const int64_t start = s.target_cache.length() - b;
    s.target_cache.truncate(start + acceptance.accepted + 1);
    if (s.proposer_state) {
      const std::span<const int32_t> committed = block.first(static_cast<size_t>(acceptance.accepted + 1));
      if (active_without_taps[i]) {
        observations_without_taps.push_back({s.proposer_state.get(), committed, start, Tensor()});
      } else {
        // A proposer that asked for no tap layers gets no hidden states.
        Tensor taps = out.taps.defined() ? out.taps.slice_rows(row, acceptance.accepted + 1) : Tensor();
        observations.push_back({s.proposer_state.get(), committed, start, taps});
      }
    }
    if (b > 1) {
      s.spec_stats.draft_steps += 1;
      s.spec_stats.drafted_tokens += b - 1;
      s.spec_stats.accepted_tokens += acceptance.accepted;
      policy_.record_acceptance(s.spec_state, b - 1, acceptance.accepted);
      if (options_.on_trace) {
        options_.on_trace({s.id, start, std::vector<int32_t>(draft.begin(), draft.end()), acceptance.accepted,
                           acceptance.bonus});
      }
    }
    s.spec_stats.target_passes += 1;
    s.spec_stats.committed_tokens += acceptance.accepted + 1;

    std::vector<int32_t> produced(draft.begin(), draft.begin() + acceptance.accepted);
    produced.push_back(acceptance.bonus);
    s.next_token = acceptance.bonus;
    StepEvent event{.id = s.id};
    emit(s, produced, event);
    if (options_.on_event) options_.on_event(event);
    row += b;
  }
  // Taps are views into the model's workspace: inject before the next target pass.
  if (!observations.empty()) proposer_->observe(observations);
  if (!observations_without_taps.empty()) proposer_->observe_without_taps(observations_without_taps);
  phases_.other += seconds_since(other_start);
}

void Engine::sample_on_backend(const Tensor& logits, std::span<Sequence* const> active,
                               std::span<const SequenceChunk> chunks) {
  std::vector<float> params;
  for (size_t i = 0; i < active.size(); ++i) {
    Sequence& s = *active[i];
    const SamplingParams& sampling = s.request.generation.sampling;
    for (size_t r = 0; r < chunks[i].tokens.size(); ++r) {
      const std::array<float, 4> row = RowSampler::params_for(sampling, sampling.greedy() ? 0.0 : s.sampler.uniform());
      params.insert(params.end(), row.begin(), row.end());
    }
  }
  choices_ = row_sampler_(model_.backend(), logits, params);
}

void Engine::fetch_logits(const Tensor& logits, bool all_greedy) {
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

void Engine::emit(Sequence& s, std::span<const int32_t> tokens, StepEvent& event) {
  const GenerationRequest& g = s.request.generation;
  const ModelConfig& config = model_.config();
  for (int32_t token : tokens) {
    if (s.finish_reason) return;
    if ((!g.ignore_eos && contains(config.eos_token_ids, token)) || contains(g.stop_token_ids, token)) {
      finish(s, FinishReason::kStop, event);
      return;
    }
    TextStream::Step text = s.text_stream.push({&token, 1});
    if (text.tokens_kept > 0) {
      s.output.push_back(token);
      event.token_ids.push_back(token);
    }
    s.text += text.text;
    event.text += text.text;
    if (text.stopped) {
      s.finish_reason = FinishReason::kStop;  // the held-back text is the stop string: dropped
      event.finished = true;
      event.finish_reason = FinishReason::kStop;
      return;
    }
    if (static_cast<int64_t>(s.output.size()) >= g.max_tokens) {
      finish(s, FinishReason::kLength, event);
      return;
    }
  }
}

void Engine::finish(Sequence& s, FinishReason reason, StepEvent& event) {
  // Release text held back for an incomplete character or a possible stop string.
  TextStream::Step tail = s.text_stream.finish();
  if (tail.stopped && reason != FinishReason::kCancelled) reason = FinishReason::kStop;
  s.text += tail.text;
  event.text += tail.text;
  s.finish_reason = reason;
  event.finished = true;
  event.finish_reason = reason;
  event.cancelled = reason == FinishReason::kCancelled;
}

void Engine::retire() {
  auto done = [](const std::unique_ptr<Sequence>& s) { return s->finish_reason.has_value(); };
  for (auto& s : running_) {
    if (!done(s)) continue;
    const auto now = Clock::now();
    const bool produced = s->first_token_at.time_since_epoch().count() != 0;
    finished_.push_back({s->id, s->output, s->text, *s->finish_reason, s->cancelled,
                         static_cast<int64_t>(s->request.generation.prompt_tokens.size()), s->spec_stats,
                         produced ? std::chrono::duration<double>(s->first_token_at - s->admitted_at).count() : 0.0,
                         std::chrono::duration<double>(now - s->admitted_at).count()});
  }
  running_.erase(std::remove_if(running_.begin(), running_.end(), done), running_.end());
}

std::vector<FinishedSequence> Engine::take_finished() {
  std::vector<FinishedSequence> out;
  out.swap(finished_);
  return out;
}

}  // namespace flashq
