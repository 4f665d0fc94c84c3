#include "worker/engine/engine.h"

#include <algorithm>
#include <chrono>

#include "shared/error.h"
#include "worker/model/preemption_policy.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

Engine::Engine(TargetModel& model, Proposer* proposer, EngineOptions options)
    : model_(model),
      proposer_(proposer),
      options_(std::move(options)),
      policy_(proposer ? proposer->max_block_size() : 1),
      planner_(policy_, proposer),
      verifier_(model, options_.sample_on_backend.value_or(model.backend().device() != Device::kCpu)) {
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
      throw Error(ErrorCode::kInvalidArgument,
                  "prompt token id " + std::to_string(token) + " is outside the vocabulary");
    }
  }
  validate_sampling(g.sampling);
  if (g.logprobs < -1 || g.logprobs > kMaxTopLogprobs) {
    throw Error(ErrorCode::kInvalidArgument,
                "logprobs must be -1 (none) or 0.." + std::to_string(kMaxTopLogprobs) + " top tokens");
  }
  if (request.constraint && g.ignore_eos) {
    throw Error(ErrorCode::kInvalidArgument,
                "ignore_eos cannot go with a constraint: it decides where the output ends");
  }
  if (request.spec == SpecMode::kDflash && !proposer_) {
    throw Error(ErrorCode::kInvalidArgument, "spec 'dflash' needs a drafter, and this engine has none");
  }
  const int64_t max_block = proposer_ ? proposer_->max_block_size() : 1;
  if (request.block_size < 0 || request.block_size > max_block || request.block_size == 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "block_size must be between 2 and " + std::to_string(max_block) + " (0: the drafter's own)");
  }
  const int64_t max_length = prompt_length + g.max_tokens;
  PagedKvStore* paged = options_.paged_cache;
  KvCache cache = paged ? model_.make_cache(max_length, *paged) : model_.make_cache(max_length);
  if (paged) {
    const BlockPool& blocks = paged->blocks();
    const int64_t need = blocks.blocks_to_hold(cache.max_length());
    if (need > blocks.blocks()) {
      throw Error(ErrorCode::kInvalidArgument, "prompt and max_tokens (" + std::to_string(cache.max_length()) +
                                                   " positions) need " + std::to_string(need) +
                                                   " blocks of KV cache; this worker's paged cache pool holds " +
                                                   std::to_string(blocks.blocks()) + " blocks");
    }
  }
  if (options_.cache_pool) {
    const bool drafts = proposer_ && request.spec != SpecMode::kOff;
    const int64_t need = (paged ? 0 : CachePool::footprint(cache.whole_bytes())) +
                         (drafts ? CachePool::footprint(proposer_->pooled_bytes(cache.max_length())) : 0);
    if (need > options_.cache_pool->capacity_bytes()) {
      throw Error(ErrorCode::kInvalidArgument, "prompt and max_tokens (" + std::to_string(cache.max_length()) +
                                                   " positions) need " + std::to_string(need) +
                                                   " bytes of KV cache; this worker's cache pool holds " +
                                                   std::to_string(options_.cache_pool->capacity_bytes()));
    }
  }
  auto sequence = std::make_unique<Sequence>(id, std::move(request), std::move(cache));
  sequence->end_ids = config.eos_token_ids;
  const std::vector<int32_t>& stop_ids = sequence->request.generation.stop_token_ids;
  sequence->end_ids.insert(sequence->end_ids.end(), stop_ids.begin(), stop_ids.end());
  waiting_.push_back(std::move(sequence));
}

void Engine::cancel(uint64_t id) { request_end(id, FinishReason::kCancelled); }

void Engine::stop(uint64_t id) { request_end(id, FinishReason::kStop); }

void Engine::request_end(uint64_t id, FinishReason reason) {
  auto request = [&](Sequence& s) {
    if (s.id == id && !s.requested_end) s.requested_end = reason;
  };
  for (auto& s : running_) request(*s);
  for (auto& s : waiting_) request(*s);
}

void Engine::step() {
  for (auto& s : running_) {
    if (s->requested_end && !s->finish_reason) {
      StepEvent event{.id = s->id};
      finish_sequence(*s, *s->requested_end, event);
      publish(event);
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
    if (!waiting_.front()->requested_end && !take_caches(*waiting_.front())) {
      // add() refused what an empty pool could not hold: with nothing running, this is a bug.
      check_invariant(!running_.empty(), "a sequence's caches fit an empty cache pool");
      break;  // it waits, first in line, for running sequences to give memory back
    }
    std::unique_ptr<Sequence> sequence = std::move(waiting_.front());
    waiting_.pop_front();
    if (sequence->admitted_at.time_since_epoch().count() == 0) sequence->admitted_at = Clock::now();
    sequence->admission_order = ++admissions_;
    if (sequence->requested_end) {
      StepEvent event{.id = sequence->id};
      finish_sequence(*sequence, *sequence->requested_end, event);
      publish(event);
    } else {
      prefill(*sequence, batch);
    }
    running_.push_back(std::move(sequence));
  }
}

bool Engine::take_caches(Sequence& s) {
  if (!s.preempted) s.context = s.request.generation.prompt_tokens;
  PagedKvStore* paged = options_.paged_cache;
  const std::span<const int32_t> lookup =
      paged && options_.prefix_caching ? std::span<const int32_t>(s.context) : std::span<const int32_t>();
  if (paged) {
    // Room for one more block for every running sequence and this one: admitting into a pool
    // with no room to grow would only preempt the newest sequence again at the next step.
    const auto length = static_cast<int64_t>(s.context.size());
    const int64_t headroom = static_cast<int64_t>(running_.size() + 1) * paged->block_size();
    if (!paged->blocks().can_admit(lookup, std::min(length + headroom, s.target_cache.max_length()))) return false;
  } else if (options_.cache_pool && !s.target_cache.take_whole(*options_.cache_pool)) {
    return false;
  }
  if (planner_.speculates(s)) {
    s.proposer_state = proposer_->start_sequence(s.target_cache.max_length());
    if (!s.proposer_state) {
      if (!paged) s.target_cache.release();
      return false;
    }
  }
  // Only now that the sequence is admitted: the prefix is looked up (and counted) once.
  if (paged) {
    if (options_.prefix_caching) s.target_cache.register_as_written(&s.context);
    const int64_t draft_blocks = lookup.empty() ? 0 : s.target_cache.adopt_prefix(lookup).draft_blocks;
    const bool reserved = s.target_cache.try_reserve(static_cast<int64_t>(s.context.size()));
    check_invariant(reserved, "an admitted sequence's blocks can be had");
    s.imported_draft_positions = 0;
    if (s.proposer_state && draft_blocks > 0 && paged->holds_draft_context()) {
      s.imported_draft_positions = proposer_->import_context_blocks(
          s.proposer_state.get(), *paged, s.target_cache.block_ids().first(static_cast<size_t>(draft_blocks)));
      draft_hit_tokens_ += s.imported_draft_positions;
    }
  }
  return true;
}

// One pass per prompt, so a sequence's numbers never depend on what it was admitted with. With a
// cached prefix only the rest runs; a preempted sequence runs its context again (mostly a prefix
// hit) and, its next token known and emitted, emits nothing.
void Engine::prefill(Sequence& s, int64_t batch) {
  const auto start = Clock::now();
  const std::span<const int32_t> context = s.context;
  const int64_t cached = s.target_cache.length();
  const std::span<const int32_t> rest = context.subspan(static_cast<size_t>(cached));
  const bool observe = planner_.speculates(s);
  // An `auto` sequence joining a batch where no drafting could pay keeps no hidden states of its
  // prompt (their injection costs a tenth of the prefill); were it to draft later, its drafter
  // would see only the tokens since.
  const bool taps = observe && !planner_.out_of_drafting(s, batch);

  SequenceChunk chunk{rest, &s.target_cache};
  ForwardOptions forward{.logits = s.preempted ? LogitRows::kNone : LogitRows::kLastOfEachChunk};
  if (taps) forward.tap_layers = proposer_->tap_layers();
  ForwardOutput out = model_.forward({&chunk, 1}, forward);
  const int32_t first = s.preempted ? s.next_token : verifier_.first_token(out.logits, s);
  if (observe) {
    // The drafter's context has the rows that came with the cached prefix and skips the rest of
    // it: the target did not run it, so it has no taps.
    const int64_t imported = s.imported_draft_positions;
    if (cached > imported) {
      Observation skipped{s.proposer_state.get(),
                          context.subspan(static_cast<size_t>(imported), static_cast<size_t>(cached - imported)),
                          imported, Tensor()};
      proposer_->observe_without_taps({&skipped, 1});
    }
    Observation o{s.proposer_state.get(), rest, cached, taps ? out.taps : Tensor()};
    if (taps) {
      proposer_->observe({&o, 1});
    } else {
      proposer_->observe_without_taps({&o, 1});
    }
  }
  register_blocks(s);
  phases_.prefill += seconds_since(start);
  if (s.preempted) {
    s.preempted = false;
    return;
  }

  s.first_token_at = Clock::now();
  StepEvent event{.id = s.id};
  s.next_token = first;
  emit_tokens(s, {&first, 1}, model_.config().eos_token_ids, event);
  if (s.request.generation.logprobs >= 0 && !event.token_ids.empty()) {
    event.logprobs.push_back(verifier_.first_token_logprobs(first));
  }
  publish(event);
}

void Engine::register_blocks(Sequence& s) {
  if (!options_.paged_cache || !options_.prefix_caching) return;
  const KvCache& cache = s.target_cache;
  if (cache.length() / cache.block_size() > cache.registered_blocks()) s.target_cache.commit_full_blocks(s.context);
}

void Engine::reserve_blocks(std::vector<SequenceStep>& steps) {
  for (SequenceStep& step : steps) {
    Sequence& s = *step.sequence;
    if (step.block_size == 0 || s.preempted) continue;
    while (!s.target_cache.try_reserve(step.start + step.block_size)) {
      std::vector<PreemptionCandidate> candidates;
      std::vector<Sequence*> of;
      bool others_hold_blocks = false;
      for (auto& running : running_) {
        if (running->finish_reason || running->preempted) continue;
        const int64_t blocks = running->target_cache.held_blocks();
        candidates.push_back({running->id, running->admission_order, blocks});
        of.push_back(running.get());
        others_hold_blocks |= running.get() != &s && blocks > 0;
      }
      const std::optional<size_t> victim = choose_preemption_victim(candidates);
      if (!victim || (of[*victim] == &s && !others_hold_blocks)) {
        // It holds every block it could have: preempting it would free nothing it could use.
        StepEvent event{.id = s.id};
        finish_sequence(s, FinishReason::kLength, event);
        publish(event);
        step.block_size = 0;
        break;
      }
      preempt(*of[*victim]);
      if (of[*victim] == &s) break;
    }
  }
  steps.erase(
      std::remove_if(steps.begin(), steps.end(), [](const SequenceStep& step) { return step.sequence->preempted; }),
      steps.end());
  // Back to the front of the queue, in the order they were admitted.
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if ((*it)->preempted) waiting_.push_front(std::move(*it));
  }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
}

void Engine::keep_draft_context(Sequence& s) {
  PagedKvStore* store = options_.paged_cache;
  if (!store || !store->holds_draft_context() || !options_.prefix_caching || !s.proposer_state) return;
  const int64_t through = proposer_->ordered_context(s.proposer_state.get());
  for (const auto& [index, id] : s.target_cache.draft_context_to_write(through)) {
    proposer_->export_context_block(s.proposer_state.get(), index * store->block_size(), *store, id);
  }
  s.target_cache.commit_draft_context(through);
}

// The next turn of a conversation, or the sequence itself when it resumes, continues its tokens:
// its last, partial block stays cached as a tail, with a hybrid model's recurrent state after it.
void Engine::release_blocks(Sequence& s) {
  if (options_.paged_cache && options_.prefix_caching) {
    model_.settle_recurrent_state(s.target_cache);
    s.target_cache.clear_blocks_keeping_tail(s.context);
  } else {
    s.target_cache.clear_blocks();
  }
}

void Engine::preempt(Sequence& s) {
  register_blocks(s);
  keep_draft_context(s);
  release_blocks(s);
  s.proposer_state.reset();
  s.preempted = true;
  ++preemptions_;
}

std::optional<PagedCacheStats> Engine::cache_stats() const {
  if (!options_.paged_cache) return std::nullopt;
  return PagedCacheStats{.blocks = options_.paged_cache->blocks().stats(),
                         .preemptions = preemptions_,
                         .draft_hit_tokens = draft_hit_tokens_};
}

void Engine::decode_step() {
  std::vector<Sequence*> batch;
  for (auto& s : running_) {
    if (!s->finish_reason) batch.push_back(s.get());
  }
  if (batch.empty()) return;
  const auto step_start = Clock::now();
  const double timed_before = phases_.draft + phases_.verify;
  auto count_other_time = [&] {
    phases_.other += seconds_since(step_start) - (phases_.draft + phases_.verify - timed_before);
  };

  // Plan: each sequence's block size, clamped to max_tokens and the context.
  std::vector<SequenceStep> steps = planner_.plan(batch);
  end_full_contexts(steps);
  if (options_.jump_forward) add_forced_runs(steps);
  if (options_.paged_cache) reserve_blocks(steps);

  // Propose: one drafter pass for every sequence that drafts.
  propose(steps);

  // Verify: one target pass over every sequence's block.
  std::vector<SequenceStep*> verified;
  for (SequenceStep& step : steps) {
    if (step.block_size > 0) verified.push_back(&step);
  }
  if (verified.empty()) {
    count_other_time();
    return;
  }
  const Verifier::Pass pass = verifier_.verify(verified, tap_layers_for(verified));
  phases_.verify += pass.seconds;
  policy_.record_target_pass(
      pass.rows, options_.target_pass_timer ? options_.target_pass_timer(pass.rows, pass.seconds) : pass.seconds);

  // Accept and commit, then emit, sequence by sequence.
  std::vector<Observation> observations, observations_without_taps;
  for (SequenceStep* step : verified) {
    step->acceptance = verifier_.accept(*step);
    commit(*step, pass, observations, observations_without_taps);
    emit(*step);
  }
  // Taps are views into the model's workspace: inject before the next target pass.
  if (!observations.empty()) proposer_->observe(observations);
  if (!observations_without_taps.empty()) proposer_->observe_without_taps(observations_without_taps);
  count_other_time();
}

void Engine::end_full_contexts(std::span<SequenceStep> steps) {
  for (SequenceStep& step : steps) {
    if (step.block_size > 0) continue;
    StepEvent event{.id = step.sequence->id};
    finish_sequence(*step.sequence, FinishReason::kLength, event);
    publish(event);
  }
}

void Engine::add_forced_runs(std::span<SequenceStep> steps) {
  const int64_t context = model_.config().max_position_embeddings;
  for (SequenceStep& step : steps) {
    Sequence& s = *step.sequence;
    if (step.block_size != 1 || !s.request.constraint) continue;  // a drafter's draft keeps to it already
    const auto emitted = static_cast<int64_t>(s.output.size());
    // The block [x, f_1..f_k] emits k + 1 tokens and takes positions start..start + k.
    const int64_t room =
        std::min({kMaxForcedRun, s.request.generation.max_tokens - emitted - 1, context - step.start - 1});
    TokenConstraint& constraint = *s.request.constraint;
    while (static_cast<int64_t>(step.draft.size()) < room) {
      const std::optional<int32_t> token = constraint.forced_token();
      if (!token) break;
      constraint.advance(*token);
      step.draft.push_back(*token);
    }
    constraint.rollback(static_cast<int64_t>(step.draft.size()));
    if (step.draft.empty()) continue;
    step.forced = true;
    step.block_size = 1 + static_cast<int64_t>(step.draft.size());
  }
}

void Engine::propose(std::span<SequenceStep> steps) {
  std::vector<ProposalRequest> proposals;
  int64_t rows = 0;
  for (SequenceStep& step : steps) {
    if (step.block_size < 2 || step.forced) continue;
    Sequence& s = *step.sequence;
    step.draft_q.clear();
    proposals.push_back({s.proposer_state.get(), s.next_token, step.start, step.block_size, &step.draft,
                         options_.mask_drafts ? s.request.constraint.get() : nullptr, s.end_ids, &step.draft_q,
                         s.request.generation.sampling.temperature, &s.sampler});
    rows += step.block_size;
  }
  if (proposals.empty()) return;
  // Deferred work on committed tokens is owed whether the sequence drafts now or later: it is
  // kept out of the drafting time the policy weighs.
  const auto catch_up_start = Clock::now();
  proposer_->catch_up(proposals);
  phases_.draft += seconds_since(catch_up_start);
  const auto start = Clock::now();
  proposer_->propose(proposals);
  const double seconds = seconds_since(start);
  phases_.draft += seconds;
  policy_.record_draft_pass(rows, options_.draft_pass_timer ? options_.draft_pass_timer(rows, seconds) : seconds);
}

std::vector<int64_t> Engine::tap_layers_for(std::span<SequenceStep* const> verified) const {
  const bool keeps_hidden_states = std::any_of(verified.begin(), verified.end(), [](const SequenceStep* step) {
    return step->sequence->proposer_state != nullptr && !step->without_taps;
  });
  return keeps_hidden_states ? proposer_->tap_layers() : std::vector<int64_t>();
}

void Engine::commit(SequenceStep& step, const Verifier::Pass& pass, std::vector<Observation>& observations,
                    std::vector<Observation>& observations_without_taps) {
  Sequence& s = *step.sequence;
  const Acceptance& acceptance = step.acceptance;
  const int64_t committed_count = acceptance.accepted + 1;
  s.target_cache.truncate(step.start + committed_count);
  check_invariant(static_cast<int64_t>(s.context.size()) == step.start, "the context holds the cached tokens");
  s.context.insert(s.context.end(), step.block.begin(), step.block.begin() + committed_count);
  register_blocks(s);
  if (s.proposer_state) {
    const std::span<const int32_t> committed =
        std::span<const int32_t>(step.block).first(static_cast<size_t>(committed_count));
    if (step.without_taps) {
      observations_without_taps.push_back({s.proposer_state.get(), committed, step.start, Tensor()});
    } else {
      // A proposer that asked for no tap layers gets no hidden states.
      Tensor taps = pass.taps.defined() ? pass.taps.slice_rows(step.first_row, committed_count) : Tensor();
      observations.push_back({s.proposer_state.get(), committed, step.start, taps});
    }
  }
  // A forced run is no draft: it counts in no speculation figure and no trace.
  const int64_t drafted = step.forced ? 0 : static_cast<int64_t>(step.block.size()) - 1;
  if (drafted > 0) {
    s.spec_stats.draft_steps += 1;
    s.spec_stats.drafted_tokens += drafted;
    s.spec_stats.accepted_tokens += acceptance.accepted;
    policy_.record_acceptance(s.spec_state, drafted, acceptance.accepted);
    if (options_.on_trace) options_.on_trace({s.id, step.start, step.draft, acceptance.accepted, acceptance.bonus});
  }
  s.spec_stats.target_passes += 1;
  s.spec_stats.committed_tokens += committed_count;
  s.next_token = acceptance.bonus;  // the new x: chosen by the target, not yet run through it
}

void Engine::emit(SequenceStep& step) {
  Sequence& s = *step.sequence;
  std::vector<int32_t> produced(step.block.begin() + 1, step.block.begin() + 1 + step.acceptance.accepted);
  produced.push_back(step.acceptance.bonus);
  StepEvent event{.id = s.id,
                  .drafted = step.forced ? 0 : static_cast<int64_t>(step.block.size()) - 1,
                  .accepted = step.forced ? 0 : step.acceptance.accepted};
  emit_tokens(s, produced, model_.config().eos_token_ids, event);
  if (s.request.generation.logprobs >= 0) {
    event.logprobs = verifier_.logprobs(step, produced);
    event.logprobs.resize(event.token_ids.size());  // the kept tokens are a prefix of what was produced
  }
  publish(event);
}

void Engine::publish(const StepEvent& event) const {
  if (options_.on_event) options_.on_event(event);
}

void Engine::retire() {
  auto done = [](const std::unique_ptr<Sequence>& s) { return s->finish_reason.has_value(); };
  for (auto& s : running_) {
    if (!done(s)) continue;
    keep_draft_context(*s);
    release_blocks(*s);
    const auto now = Clock::now();
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    const bool produced = s->first_token_at.time_since_epoch().count() != 0;
    finished_.push_back({s->id, s->output, *s->finish_reason,
                         static_cast<int64_t>(s->request.generation.prompt_tokens.size()), s->spec_stats,
                         produced ? seconds(s->first_token_at - s->added_at) : 0.0, seconds(now - s->added_at),
                         seconds(s->admitted_at - s->added_at)});
  }
  running_.erase(std::remove_if(running_.begin(), running_.end(), done), running_.end());
}

std::vector<FinishedSequence> Engine::take_finished() {
  std::vector<FinishedSequence> out;
  out.swap(finished_);
  return out;
}

}  // namespace flashq
