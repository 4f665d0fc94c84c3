// Cache-aware routing (docs/decisions.md, "Cache-aware routing"): jobs in queue order as
// LeastLoadedDispatcher takes them, each to the worker whose caches most likely hold its prefix.
//  1. a job naming a `session` goes to the worker that served the session's previous job;
//  2. else (or when that worker cannot take it), to the worker that the broker last sent the
//     longest known prefix of the prompt (prompt_prefix.h: blocks of 256 bytes, keyed by hash);
//  3. else to the least-loaded worker, as without routing.
// A preferred worker must serve the job's model, have a free slot, have a drafter when a
// `spec: dflash` job could get one elsewhere, and carry a load (share of its slots in use) at most
// `max_load_gap` above the least-loaded candidate's: a hot session spills onto other workers
// rather than queueing behind itself or starving the pool. What the broker remembers is bounded
// (least recently used forgotten first) and a worker's entries go when it leaves.
#pragma once

#include <cstdint>
#include <string>

#include "broker/affinity_cache.h"
#include "broker/dispatcher.h"
#include "broker/routing_options.h"

namespace flashq {

class CacheAwareDispatcher final : public Dispatcher {
 public:
  explicit CacheAwareDispatcher(RoutingOptions options);

  std::optional<Assignment> next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) override;
  void worker_left(const std::string& identity) override;

  std::size_t sessions_known() const override { return sessions_.size(); }
  std::size_t prefix_blocks_known() const override { return prefix_blocks_.size(); }

 private:
  // Where `job` goes, given the least-loaded worker that can take it.
  Assignment route(const std::string& id, const protocol::Job& job, const std::vector<std::uint64_t>& keys,
                   WorkerRecord& least, WorkerRegistry& workers);
  void remember(const protocol::Job& job, const std::vector<std::uint64_t>& keys, const WorkerRecord& worker);

  RoutingOptions options_;
  AffinityCache<std::string> sessions_;         // session -> worker that served it last
  AffinityCache<std::uint64_t> prefix_blocks_;  // prefix block key -> worker last sent it
};

}  // namespace flashq
