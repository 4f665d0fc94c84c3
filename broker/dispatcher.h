// The scheduling policy (docs/protocol.md §9.4): which queued job starts next, and on which
// worker. The broker asks for one assignment at a time and carries it out (ASSIGN, bookkeeping);
// a policy only chooses. A routing policy that prefers the worker holding a job's session or
// prompt prefix replaces LeastLoadedDispatcher behind the same interface.
#pragma once

#include <optional>
#include <string>

#include "broker/job_queue.h"
#include "broker/job_table.h"
#include "broker/worker_registry.h"

namespace flashq {

struct Assignment {
  std::string job_id;     // taken out of the queue
  WorkerRecord* worker;   // serves the job's model and has a free slot
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  // The next job to start, removed from `queue`, with its worker; none when no queued job has a
  // worker free to run it. Never assigns a worker more jobs than its free slots.
  virtual std::optional<Assignment> next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) = 0;
};

// Jobs in queue order (priority, then FIFO), each to the least-loaded worker serving its model;
// a job whose model no free worker serves waits without holding up the jobs behind it. A `spec:
// dflash` job goes to the least-loaded free worker with a drafter when there is one, else to any
// (where it runs target-only), so it never waits for a drafter.
class LeastLoadedDispatcher final : public Dispatcher {
 public:
  std::optional<Assignment> next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) override;
};

}  // namespace flashq
