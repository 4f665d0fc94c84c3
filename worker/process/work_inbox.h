// The worker's threads and what passes between them, in order (docs/architecture.md, "Worker"):
//
//   I/O thread -> prepare thread -> engine thread -> output thread -> (MessageOutbox) I/O thread
//                   WorkItem          WorkItem        OutputItem
//
// The prepare thread turns ASSIGNs into sequences of token ids (job_preparer.h) and passes the
// rest of the broker's work on unchanged; the engine thread runs the sequences and hands each
// step's token ids on; the output thread turns them into text, matches stop strings and writes
// TOKENS and FINAL (output_thread.h), telling the engine thread when a stop string ended a
// sequence. Text work never runs on the engine thread, and the output thread never waits behind
// a long prompt. Each thread sleeps on its inbox when it has nothing to do, so an idle worker
// costs no CPU.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "shared/protocol/step_speculation.h"
#include "shared/protocol/worker_messages.h"
#include "worker/engine/token_logprobs.h"

namespace flashq {

using SteadyClock = std::chrono::steady_clock;

struct JobRequest;   // job_request.h
struct AttemptText;  // attempt_text.h

// Run this job attempt. `link` is the connection it came on (see LinkLost).
struct AssignWork {
  protocol::Assign assign;
  SteadyClock::time_point received_at;
  uint64_t link = 0;
  // Filled on the prepare thread (job_preparer.h): the sequence the engine runs and the attempt's
  // text, or why the job cannot run (what make_job_request threw). Neither: the engine thread
  // prepares it itself.
  std::shared_ptr<JobRequest> request;
  std::shared_ptr<AttemptText> text;
  std::exception_ptr refused;
};

// Stop this job: its FINAL says cancelled.
struct CancelWork {
  std::string id;
};

// The connection to the broker was lost and `link` is the next one: every job that came on an
// earlier connection is stopped without a word (the broker re-queues it as a continuation, and
// nothing of it may reach the next connection).
struct LinkLost {
  uint64_t link = 0;
};

// Shut down gracefully: take no more work, let running jobs finish until `deadline`, then cancel
// them (their FINALs say cancelled, with the reason).
struct Drain {
  SteadyClock::time_point deadline;
};

// Leave the engine loop (after Drain has finished, or when the process must go).
struct StopEngine {};

// Output thread -> engine thread: a stop string ended this sequence's text; the engine stops it
// at its next step (Engine::stop).
struct StopSequence {
  uint64_t engine_id = 0;
};

// Engine thread -> output thread: one step's output of a job attempt, token ids only.
struct AttemptTokens {
  std::shared_ptr<AttemptText> text;  // the attempt's, touched only on the output thread
  uint64_t engine_id = 0;             // its sequence, for StopSequence
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;  // one per id, when the job asked for them
  std::optional<protocol::StepSpeculation> spec;
  bool last = false;  // the sequence ended with this step
};

// Engine thread -> output thread: the attempt's FINAL, after its last AttemptTokens. Its usage
// counts the earlier attempts' tokens; the output thread adds this attempt's.
struct AttemptFinal {
  std::shared_ptr<AttemptText> text;  // null: refused before it had any text
  uint64_t link = 0;
  protocol::Final final;
};

// Engine thread -> output thread: every job ended after a Drain (its FINAL is ahead of this).
struct DrainFinished {};

// Engine thread -> output thread: the engine loop has ended; nothing more will come.
struct EngineStopped {};

// What the prepare thread and the engine thread take.
using WorkItem = std::variant<AssignWork, CancelWork, LinkLost, Drain, StopEngine, StopSequence>;
// What the output thread takes.
using OutputItem = std::variant<AttemptTokens, AttemptFinal, DrainFinished, EngineStopped>;

template <class Item>
class Inbox {
 public:
  void push(Item item) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
  }

  // Everything queued, in order; with `wait`, first sleeps until something is.
  std::vector<Item> take(bool wait) {
    std::unique_lock lock(mutex_);
    if (wait) ready_.wait(lock, [this] { return !items_.empty(); });
    std::vector<Item> out(std::make_move_iterator(items_.begin()), std::make_move_iterator(items_.end()));
    items_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> items_;
};

using WorkInbox = Inbox<WorkItem>;
using OutputInbox = Inbox<OutputItem>;

}  // namespace flashq
