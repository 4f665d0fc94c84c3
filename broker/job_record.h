// What the broker knows about one job, from SUBMIT to its final event.
#pragma once

#include <chrono>
#include <deque>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shared/protocol/final_result.h"
#include "shared/protocol/job.h"

namespace flashq {

using SteadyClock = std::chrono::steady_clock;

// kRemote: accepted here into Redis, run by whichever broker takes it; this broker relays its
// result stream from Redis to the producer and subscribers it has.
// A final result that says only why the job ended.
inline protocol::FinalResult final_with(protocol::FinishReason reason, std::optional<std::string> error = std::nullopt) {
  protocol::FinalResult result;
  result.finish_reason = reason;
  result.error = std::move(error);
  return result;
}

enum class JobPhase { kQueued, kRunning, kFinished, kRemote };

struct JobRecord {
  protocol::Job job;
  std::string producer;  // ROUTER identity of the submitting producer
  JobPhase phase = JobPhase::kQueued;
  int64_t attempt = 0;              // attempts started so far
  std::string worker;               // backend identity while running
  int64_t worker_seq = 0;           // next TOKENS seq expected from the current attempt
  int64_t next_seq = 0;             // next stream event seq (continues across attempts)
  std::vector<int32_t> streamed;    // every token published, the prefix of a continuation
  int64_t streamed_text_bytes = 0;  // the text published with them (a continuation resumes after it)
  int64_t prompt_tokens_estimate = 0;
  // Figures count from these. With Redis a job taken from the store (a restarted broker's, or
  // one claimed from a dead broker) gets them back from Redis's clock, so they hold across brokers.
  SteadyClock::time_point submitted_at;
  SteadyClock::time_point deadline_at;
  std::optional<SteadyClock::time_point> first_assigned_at;  // set once, by whichever attempt came first
  std::optional<SteadyClock::time_point> first_token_at;
  SteadyClock::time_point last_token_at;
  bool cancel_requested = false;
  bool deadline_expired = false;
  std::optional<protocol::FinalResult> final_result;
  std::deque<std::string> replay;  // encoded EVENT bodies, seq replay_first_seq ...
  int64_t replay_first_seq = 0;
  // Why the job is filed as dead with its final (a durable store keeps dead jobs apart).
  std::string dead_reason;
  // Followed for subscribers here by its id alone: the job itself (its fields, its metadata) is
  // only in the store, which answers STATUS for it.
  bool known_by_id_only = false;
  // The prefix of the stream that the store holds (and subscribers have seen, since only stored
  // events are delivered): where the job's record goes back to when another broker takes it over.
  int64_t stored_next_seq = 0;
  size_t stored_tokens = 0;
  int64_t stored_text_bytes = 0;
};

}  // namespace flashq
