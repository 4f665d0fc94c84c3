// The broker's metrics, rendered in the Prometheus text format for /metrics (each one described in
// docs/operations.md). Names follow vLLM's where one exists (time to first token, inter-token
// latency, queue time, end-to-end latency, speculative decoding counters), with the flashq_
// prefix. The broker thread records; the HTTP thread renders; a mutex between.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "shared/prometheus_text.h"
#include "shared/protocol/step_speculation.h"

namespace flashq {

struct BrokerGauges {
  std::map<int64_t, int64_t> queue_depth;  // per priority
  int64_t queued_prompt_tokens = 0;
  int64_t jobs_running = 0;
  int64_t workers = 0;
  int64_t worker_slots = 0;
  int64_t routing_sessions = 0;       // sessions the dispatcher remembers
  int64_t routing_prefix_blocks = 0;  // prompt prefix blocks it remembers
  bool draining = false;
  std::optional<bool> redis_connected;  // none without --redis
};

class BrokerMetrics {
 public:
  BrokerMetrics();

  void job_admitted();
  void job_rejected(const std::string& reason);
  void job_retried();
  void job_finished(const std::string& finish_reason);
  // One TOKENS event of `count` tokens, `seconds` after the submission (the first: time to first
  // token) or after the job's previous event (then `count` inter-token observations of
  // seconds / count).
  void token_event(int64_t count, bool first, double seconds);
  // The speculation one TOKENS reported, counted as it arrives.
  void speculation(const protocol::StepSpeculation& spec);
  // An assignment (first or a continuation's) and why it went to its worker (dispatcher.h's
  // RoutingReason names).
  void job_routed(const std::string& reason);
  // With Redis: a job taken from flashq:jobs went to the broker that owns its session.
  void job_handed_over();
  // A job's first assignment to a worker, `seconds` after its submission.
  void job_started(double queued_seconds);
  // A job's end (any finish reason), `seconds` after its submission.
  void job_ended(double seconds);
  void set_gauges(BrokerGauges gauges);

  std::string render() const;
  bool draining() const;
  int64_t workers() const;
  // /readyz: workers registered, not draining, and Redis (when configured) connected.
  bool ready() const;

 private:
  mutable std::mutex mutex_;
  uint64_t admitted_ = 0, retries_ = 0, generation_tokens_ = 0, handovers_ = 0;
  uint64_t drafts_ = 0, draft_tokens_ = 0, accepted_ = 0;
  std::vector<uint64_t> accepted_per_pos_;  // [i]: drafts whose position i was accepted
  std::map<std::string, uint64_t> rejected_, finished_, routed_;
  Histogram ttft_, inter_token_, queue_time_, e2e_latency_;
  BrokerGauges gauges_;
};

}  // namespace flashq
