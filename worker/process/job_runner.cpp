#include "worker/process/job_runner.h"

#include <spdlog/spdlog.h>

#include "shared/error.h"
#include "worker/process/job_preparer.h"

namespace flashq {
namespace {

int64_t ms_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

protocol::FinishReason wire_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return protocol::FinishReason::kStop;
    case FinishReason::kLength:
      return protocol::FinishReason::kLength;
    case FinishReason::kCancelled:
      return protocol::FinishReason::kCancelled;
  }
  return protocol::FinishReason::kError;
}

protocol::FinalResult error_result(const std::string& message) {
  protocol::FinalResult result{.finish_reason = protocol::FinishReason::kError};
  result.error = message.empty() ? std::string("unknown error") : message;
  return result;
}

// The FINAL of a job the worker cannot run (docs/protocol.md 9.5): a bad request (the engine's or
// the tokenizer's typed error naming the problem: prompt too long, ids outside the vocabulary,
// bad sampling, another model) is `rejected`; a failure of our own is `error`, starting with
// "internal:". Neither is success.
protocol::FinalResult refusal_result(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  const bool internal = error == nullptr || error->code() == ErrorCode::kInternal;
  if (internal) return error_result(std::string("internal: ") + e.what());
  protocol::FinalResult result{.finish_reason = protocol::FinishReason::kRejected};
  result.error = e.what();
  return result;
}

}  // namespace

struct JobRunner::Attempt {
  std::string id;
  int64_t attempt = 1;
  uint64_t link = 0;
  int64_t prompt_tokens = 0;   // the job's prompt, without resume tokens
  int64_t resumed_tokens = 0;  // output of earlier attempts
  std::shared_ptr<AttemptText> text;  // what the output thread keeps of it (null when refused)
  // received_at: the ASSIGN reached the worker; admitted_at: the engine admitted the sequence
  // (took it from its queue), or the worker refused or ended the job without one.
  SteadyClock::time_point received_at, added_at, admitted_at;
  std::optional<SteadyClock::time_point> first_token_at;
  std::optional<std::string> cancel_reason;         // why the worker itself cancelled it
  std::optional<SteadyClock::time_point> deadline;  // from the job's deadline_ms (time left)
  bool deadline_passed = false;                     // cancelled by the worker at the deadline: FINAL says deadline
  bool silent = false;                              // its connection was lost: nothing more of it is sent
};

JobRunner::JobRunner(TargetModel& model, const Tokenizer& tokenizer, Proposer* proposer, WorkerModel served,
                     int64_t slots, const EngineOptions& caches, WorkInbox& inbox, OutputInbox& output,
                     WorkerMetrics* metrics)
    : model_(model),
      tokenizer_(tokenizer),
      proposer_(proposer),
      served_(std::move(served)),
      slots_(slots),
      caches_{
          .cache_pool = caches.cache_pool, .paged_cache = caches.paged_cache, .prefix_caching = caches.prefix_caching},
      inbox_(inbox),
      output_(output),
      metrics_(metrics) {
  start_engine();
}

JobRunner::~JobRunner() = default;

void JobRunner::start_engine() {
  EngineOptions options{.max_slots = slots_,
                        .cache_pool = caches_.cache_pool,
                        .paged_cache = caches_.paged_cache,
                        .prefix_caching = caches_.prefix_caching};
  options.on_event = [this](const StepEvent& event) { on_event(event); };
  engine_ = std::make_unique<Engine>(model_, proposer_, std::move(options));
}

void JobRunner::run() {
  while (!stop_) {
    std::vector<WorkItem> items = inbox_.take(/*wait=*/engine_->idle());
    for (WorkItem& item : items) std::visit([this](auto& work) { handle(work); }, item);
    if (stop_) break;
    cancel_after_drain_deadline();
    cancel_past_job_deadlines();
    if (!engine_->idle()) step_engine();
    if (drain_deadline_ && !drain_reported_ && engine_->idle()) {
      drain_reported_ = true;
      output_.push(DrainFinished{});
    }
  }
  output_.push(EngineStopped{});
}

void JobRunner::handle(AssignWork& work) {
  if (work.link < link_) return;  // came on a connection that is gone; the broker re-queued it
  const protocol::Assign& assign = work.assign;
  if (auto it = by_job_id_.find(assign.job.id); it != by_job_id_.end()) {
    // The broker assigned the job again (it gave up on the earlier attempt): only the new one speaks.
    spdlog::warn("job {}: assigned again (attempt {}) while attempt {} runs here; dropping that one", assign.job.id,
                 assign.attempt, attempts_.at(it->second)->attempt);
    attempts_.at(it->second)->silent = true;
    engine_->cancel(it->second);
    by_job_id_.erase(it);
  }
  const uint64_t engine_id = next_engine_id_++;
  auto owned = std::make_unique<Attempt>();
  Attempt& a = *owned;
  a.id = assign.job.id;
  a.attempt = assign.attempt;
  a.link = work.link;
  a.received_at = work.received_at;
  if (assign.job.deadline_ms > 0) a.deadline = a.received_at + std::chrono::milliseconds(assign.job.deadline_ms);
  attempts_.emplace(engine_id, std::move(owned));
  by_job_id_[a.id] = engine_id;
  load_.store(static_cast<int64_t>(attempts_.size()));
  try {
    if (!work.request && !work.refused) prepare_job(work, tokenizer_, served_);  // no prepare thread before us
    if (work.refused) std::rethrow_exception(work.refused);
    JobRequest& request = *work.request;
    a.prompt_tokens = request.job_prompt_tokens;
    a.resumed_tokens = request.resumed_tokens;
    a.text = std::move(work.text);
    if (request.nothing_left) {  // earlier attempts produced max_tokens already: no sequence runs
      a.added_at = a.admitted_at = SteadyClock::now();
      // What the earlier attempt held back of its text is released, as at any end.
      output_.push(AttemptTokens{.text = a.text, .engine_id = engine_id, .last = true});
      send_final(a, {.finish_reason = protocol::FinishReason::kLength});
      forget(engine_id);
      return;
    }
    engine_->add(engine_id, std::move(request.sequence));
    a.added_at = a.admitted_at = SteadyClock::now();  // admitted_at: until the engine says when
    spdlog::info("job {} attempt {}: {} prompt tokens, {} resumed", a.id, a.attempt, a.prompt_tokens, a.resumed_tokens);
  } catch (const std::exception& e) {
    spdlog::info("job {} attempt {} refused: {}", a.id, a.attempt, e.what());
    a.added_at = a.admitted_at = SteadyClock::now();
    send_final(a, refusal_result(e));
    forget(engine_id);
  }
}

void JobRunner::handle(const CancelWork& work) {
  auto it = by_job_id_.find(work.id);
  if (it == by_job_id_.end()) return;  // finished already: its FINAL is on the way
  engine_->cancel(it->second);
}

void JobRunner::handle(const StopSequence& work) {
  if (attempts_.count(work.engine_id) > 0) engine_->stop(work.engine_id);
}

void JobRunner::handle(const LinkLost& work) {
  link_ = work.link;
  for (auto& [engine_id, a] : attempts_) {
    if (a->link >= link_ || a->silent) continue;
    a->silent = true;
    engine_->cancel(engine_id);
    by_job_id_.erase(a->id);
  }
}

void JobRunner::handle(const Drain& work) {
  if (!drain_deadline_ || work.deadline < *drain_deadline_) drain_deadline_ = work.deadline;
}

void JobRunner::cancel_after_drain_deadline() {
  if (!drain_deadline_ || drain_deadline_passed_ || SteadyClock::now() < *drain_deadline_) return;
  drain_deadline_passed_ = true;
  // Not cancelled but handed back: with no FINAL, the DISCONNECT that ends the drain makes the
  // broker continue each job on another worker from the tokens streamed so far.
  for (auto& [engine_id, a] : attempts_) {
    if (a->silent) continue;
    spdlog::warn("job {}: handed back to the broker, the drain timeout passed before it finished", a->id);
    a->silent = true;
    engine_->cancel(engine_id);
  }
}

void JobRunner::cancel_past_job_deadlines() {
  const auto now = SteadyClock::now();
  for (auto& [engine_id, a] : attempts_) {
    if (!a->deadline || a->deadline_passed || a->silent || now < *a->deadline) continue;
    a->deadline_passed = true;
    engine_->cancel(engine_id);
  }
}

void JobRunner::step_engine() {
  const auto started = SteadyClock::now();
  step_tokens_ = 0;
  step_sequences_.clear();
  const PhaseSeconds phases_before = engine_->phase_seconds();
  try {
    engine_->step();
  } catch (const std::exception& e) {
    spdlog::error("engine step failed: {}; ending every running job and starting a fresh engine", e.what());
    fail_all_running(std::string("internal: the engine failed: ") + e.what());
    start_engine();
    return;
  }
  // Recorded before the FINALs go out: whoever reads /metrics after a final sees its last step.
  if (metrics_ && !step_sequences_.empty()) {
    metrics_->engine_step(std::chrono::duration<double>(SteadyClock::now() - started).count(),
                          static_cast<int64_t>(step_sequences_.size()), step_tokens_,
                          static_cast<int64_t>(engine_->running()));
    const PhaseSeconds& phases = engine_->phase_seconds();
    metrics_->pass_seconds(phases.prefill - phases_before.prefill, phases.draft - phases_before.draft,
                           phases.verify - phases_before.verify, phases.other - phases_before.other);
    if (CachePool* pool = caches_.cache_pool) {
      int64_t used = pool->capacity_bytes() - pool->free_bytes();
      // Of the paged store, only the blocks sequences hold.
      if (const PagedKvStore* paged = caches_.paged_cache) used += paged->used_bytes() - paged->memory_bytes();
      metrics_->cache_pool(pool->capacity_bytes(), used);
    }
    if (const std::optional<PagedCacheStats> stats = engine_->cache_stats()) metrics_->paged_cache(*stats);
  }
  for (const FinishedSequence& done : engine_->take_finished()) finish_attempt(done);
}

void JobRunner::fail_all_running(const std::string& why) {
  for (auto& [engine_id, a] : attempts_) {
    if (!a->silent) send_final(*a, error_result(why));
  }
  attempts_.clear();
  by_job_id_.clear();
  load_.store(0);
}

void JobRunner::on_event(const StepEvent& event) {
  auto it = attempts_.find(event.id);
  if (it == attempts_.end()) return;
  Attempt& a = *it->second;
  if (a.silent) return;
  step_tokens_ += static_cast<int64_t>(event.token_ids.size());
  step_sequences_.insert(event.id);
  if (!event.token_ids.empty() && !a.first_token_at) a.first_token_at = SteadyClock::now();
  AttemptTokens step{.text = a.text,
                     .engine_id = event.id,
                     .token_ids = event.token_ids,
                     .logprobs = event.logprobs,
                     .last = event.finished};
  if (event.drafted > 0) {
    step.spec.emplace();
    step.spec->add_draft(event.drafted, event.accepted);
  }
  output_.push(std::move(step));
}

void JobRunner::finish_attempt(const FinishedSequence& done) {
  auto it = attempts_.find(done.id);
  if (it == attempts_.end()) return;
  Attempt& a = *it->second;
  a.admitted_at =
      a.added_at + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(done.queue_s));
  if (!a.silent) {
    protocol::FinalResult result;
    result.finish_reason = wire_reason(done.finish_reason);
    if (result.finish_reason == protocol::FinishReason::kCancelled) {
      if (a.deadline_passed) result.finish_reason = protocol::FinishReason::kDeadline;
      result.error = a.cancel_reason;
    }
    result.spec_stats = {.draft_steps = done.spec_stats.draft_steps,
                         .accepted_tokens = done.spec_stats.accepted_tokens,
                         .tau = done.spec_stats.tau()};
    send_final(a, std::move(result));
  }
  forget(done.id);
}

void JobRunner::send_final(Attempt& a, protocol::FinalResult result) {
  const auto now = SteadyClock::now();
  // The output thread adds this attempt's tokens (AttemptText::complete).
  result.usage = {.prompt_tokens = a.prompt_tokens, .completion_tokens = a.resumed_tokens};
  result.timings = {.queue_ms = ms_between(a.received_at, a.admitted_at),
                    .ttft_ms = a.first_token_at ? ms_between(a.received_at, *a.first_token_at) : 0,
                    .total_ms = ms_between(a.received_at, now)};
  output_.push(AttemptFinal{
      .text = a.text, .link = a.link, .final = {.id = a.id, .attempt = a.attempt, .result = std::move(result)}});
}

void JobRunner::forget(uint64_t engine_id) {
  auto it = attempts_.find(engine_id);
  if (it == attempts_.end()) return;
  auto by_id = by_job_id_.find(it->second->id);
  if (by_id != by_job_id_.end() && by_id->second == engine_id) by_job_id_.erase(by_id);
  attempts_.erase(it);
  load_.store(static_cast<int64_t>(attempts_.size()));
}

}  // namespace flashq
