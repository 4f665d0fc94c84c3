// The scheduling policy (docs/protocol.md §9.4): which queued job starts next, and on which
// worker. The broker asks for one assignment at a time and carries it out (ASSIGN, bookkeeping);
// a policy only chooses. LeastLoadedDispatcher looks at load alone; CacheAwareDispatcher
// (cache_aware_dispatcher.h) prefers the worker holding a job's session or prompt prefix.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "broker/job_queue.h"
#include "broker/job_table.h"
#include "broker/worker_registry.h"

namespace flashq {

// Why a job went where it did (flashq_routing_decisions_total{reason}): the worker that served its
// session, the worker holding the longest known prefix of its prompt, the least-loaded worker
// when nothing was known, or the least-loaded one because the worker preferred was full or too
// far above the least-loaded one's load.
enum class RoutingReason { kSession, kPrefix, kLeastLoaded, kFallback };
std::string_view routing_reason_name(RoutingReason reason);  // "session", "prefix", ...
inline constexpr RoutingReason kRoutingReasons[] = {RoutingReason::kSession, RoutingReason::kPrefix,
                                                    RoutingReason::kLeastLoaded, RoutingReason::kFallback};

struct Assignment {
  std::string job_id;     // taken out of the queue
  WorkerRecord* worker;   // serves the job's model and has a free slot
  RoutingReason reason = RoutingReason::kLeastLoaded;
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  // The next job to start, removed from `queue`, with its worker; none when no queued job has a
  // worker free to run it. Never assigns a worker more jobs than its free slots.
  virtual std::optional<Assignment> next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) = 0;
  // The worker left the registry: whatever the policy remembers about it is stale.
  virtual void worker_left(const std::string& identity) { (void)identity; }
  // Sessions and prompt prefix blocks the policy remembers (0 for a policy that keeps none).
  virtual std::size_t sessions_known() const { return 0; }
  virtual std::size_t prefix_blocks_known() const { return 0; }
};

// Jobs in queue order (priority, then FIFO), each to the least-loaded worker serving its model;
// a job whose model no free worker serves waits without holding up the jobs behind it. A `spec:
// dflash` job goes to the least-loaded free worker with a drafter when there is one, else to any
// (where it runs target-only), so it never waits for a drafter.
// Which free worker serving `job.model` a job would go to by load alone: one with a drafter for a
// `spec: dflash` job when there is one, else the least-loaded; nullptr when none is free.
WorkerRecord* least_loaded_for(const protocol::Job& job, WorkerRegistry& workers);

class LeastLoadedDispatcher final : public Dispatcher {
 public:
  std::optional<Assignment> next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) override;
};

}  // namespace flashq
