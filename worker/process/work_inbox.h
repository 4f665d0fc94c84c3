// I/O thread -> text thread -> engine thread: the work the broker sent and the worker's own state
// changes, in order. Each thread sleeps on its inbox when it has nothing to do, so an idle worker
// costs no CPU.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "shared/protocol/worker_messages.h"

namespace flashq {

using SteadyClock = std::chrono::steady_clock;

struct JobRequest;  // job_request.h

// Run this job attempt. `link` is the connection it came on (see LinkLost).
struct AssignWork {
  protocol::Assign assign;
  SteadyClock::time_point received_at;
  uint64_t link = 0;
  // Filled on the text thread (job_preparer.h): the sequence the engine runs, or why the job
  // cannot run (what make_job_request threw). Neither: the engine thread prepares it itself.
  std::shared_ptr<JobRequest> request;
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

using WorkItem = std::variant<AssignWork, CancelWork, LinkLost, Drain, StopEngine>;

class WorkInbox {
 public:
  void push(WorkItem item);
  // Everything queued, in order; with `wait`, first sleeps until something is.
  std::vector<WorkItem> take(bool wait);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<WorkItem> items_;
};

}  // namespace flashq
