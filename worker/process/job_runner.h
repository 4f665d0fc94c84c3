// The engine thread: turns the work in the inbox (ASSIGNs prepared into sequences by the text
// thread, job_preparer.h) into engine sequences, and hands every engine step's token ids (with its
// draft's counts) and every attempt's FINAL on to the output thread, which writes the TOKENS and
// FINAL messages (output_thread.h). It owns the engine (and through it the model), does no text
// work and never touches a socket; it sleeps on the inbox when no job is running.
//
// Per job attempt: one AttemptTokens per engine step that produced tokens or verified a draft,
// then exactly one AttemptFinal. A job the engine refuses (Engine::add throws) gets a FINAL
// `rejected` or `error` with the reason at once; so does every running job if an engine step
// fails, after which the engine is rebuilt and the worker goes on serving.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "shared/protocol/final_result.h"
#include "shared/protocol/step_speculation.h"
#include "worker/engine/engine.h"
#include "worker/process/job_request.h"
#include "worker/process/work_inbox.h"
#include "worker/process/worker_metrics.h"

namespace flashq {

class JobRunner {
 public:
  // `caches` says where the KV caches come from (EngineOptions' cache_pool, paged_cache and
  // prefix_caching; all null: grown on demand); `metrics` may be null (nothing recorded).
  JobRunner(TargetModel& model, const Tokenizer& tokenizer, Proposer* proposer, WorkerModel served, int64_t slots,
            const EngineOptions& caches, WorkInbox& inbox, OutputInbox& output, WorkerMetrics* metrics = nullptr);
  ~JobRunner();

  // The engine thread's loop; returns after StopEngine.
  void run();
  // Jobs running now (HEARTBEAT load); safe from any thread.
  int64_t load() const { return load_.load(); }

 private:
  struct Attempt;

  void handle(AssignWork& work);
  void handle(const CancelWork& work);
  void handle(const StopSequence& work);
  void handle(const LinkLost& work);
  void handle(const Drain& work);
  void handle(const StopEngine&) { stop_ = true; }

  void step_engine();
  void on_event(const StepEvent& event);
  void finish_attempt(const FinishedSequence& done);
  void cancel_after_drain_deadline();
  // A job's deadline_ms (the time it had left at ASSIGN) passed: it ends with `deadline`.
  void cancel_past_job_deadlines();
  void fail_all_running(const std::string& why);
  void start_engine();

  void send_final(Attempt& attempt, protocol::FinalResult result);
  void forget(uint64_t engine_id);

  TargetModel& model_;
  const Tokenizer& tokenizer_;
  Proposer* proposer_;
  WorkerModel served_;
  int64_t slots_;
  EngineOptions caches_;  // only its cache settings are read
  WorkInbox& inbox_;
  OutputInbox& output_;  // the output thread's
  WorkerMetrics* metrics_;
  int64_t step_tokens_ = 0;             // output tokens of the step in progress, for metrics_
  std::set<uint64_t> step_sequences_;  // sequences with an event in the step in progress

  std::unique_ptr<Engine> engine_;
  std::map<uint64_t, std::unique_ptr<Attempt>> attempts_;  // by engine sequence id
  std::unordered_map<std::string, uint64_t> by_job_id_;    // attempts that may still be cancelled
  uint64_t next_engine_id_ = 1;
  uint64_t link_ = 0;
  std::optional<SteadyClock::time_point> drain_deadline_;
  bool drain_deadline_passed_ = false;
  bool drain_reported_ = false;
  bool stop_ = false;
  std::atomic<int64_t> load_{0};
};

}  // namespace flashq
