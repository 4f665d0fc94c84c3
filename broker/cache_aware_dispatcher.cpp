#include "broker/cache_aware_dispatcher.h"

#include "broker/prompt_prefix.h"

namespace flashq {
namespace {

double load_of(const WorkerRecord& worker) {
  return static_cast<double>(worker.jobs.size()) / static_cast<double>(worker.ready.slots);
}

}  // namespace

CacheAwareDispatcher::CacheAwareDispatcher(RoutingOptions options)
    : options_(options),
      sessions_(static_cast<std::size_t>(options.max_sessions)),
      prefix_blocks_(static_cast<std::size_t>(options.max_prefix_blocks)) {}

std::optional<Assignment> CacheAwareDispatcher::next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) {
  if (queue.empty() || !workers.least_loaded()) return std::nullopt;
  std::optional<Assignment> chosen;
  const protocol::Job* chosen_job = nullptr;
  std::vector<std::uint64_t> keys;
  std::optional<std::string> id = queue.pop_first([&](const std::string& candidate) {
    const protocol::Job& job = jobs.jobs.at(candidate).job;
    WorkerRecord* least = least_loaded_for(job, workers);
    if (!least) return false;  // waits, without holding up the jobs behind it
    // Only the job that runs pays for its keys: a job that cannot run returned above.
    keys = prompt_prefix_keys(job, static_cast<std::size_t>(options_.prefix_blocks_per_job));
    chosen = route(candidate, job, keys, *least, workers);
    chosen_job = &job;
    return true;
  });
  if (!id) return std::nullopt;
  remember(*chosen_job, keys, *chosen->worker);
  return chosen;
}

Assignment CacheAwareDispatcher::route(const std::string& id, const protocol::Job& job,
                                       const std::vector<std::uint64_t>& keys, WorkerRecord& least,
                                       WorkerRegistry& workers) {
  // A dflash job that found a drafter among the free workers keeps to workers with one.
  const bool needs_drafter = job.spec == protocol::SpecMode::kDflash && least.ready.block_size > 0;
  bool preferred_refused = false;  // a worker was preferred but could not take the job
  auto usable = [&](const std::string* identity) -> WorkerRecord* {
    if (!identity) return nullptr;
    WorkerRecord* worker = workers.find(*identity);
    // A worker serving another model never held this prompt's cache for this job: no preference.
    if (!worker || (job.model && worker->ready.model != *job.model)) return nullptr;
    if (worker->free_slots() <= 0 || (needs_drafter && worker->ready.block_size <= 0) ||
        load_of(*worker) - load_of(least) > options_.max_load_gap) {
      preferred_refused = true;
      return nullptr;
    }
    return worker;
  };
  if (job.session) {
    if (WorkerRecord* worker = usable(sessions_.find(*job.session))) return {id, worker, RoutingReason::kSession};
  }
  // The deepest block whose worker can take the job: keys chain, so a block is known only if the
  // ones before it were sent somewhere too, and the walk stops at the first unknown one.
  WorkerRecord* deepest = nullptr;
  for (std::uint64_t key : keys) {
    const std::string* identity = prefix_blocks_.find(key);
    if (!identity) break;
    if (WorkerRecord* worker = usable(identity)) deepest = worker;
  }
  if (deepest) return {id, deepest, RoutingReason::kPrefix};
  return {id, &least, preferred_refused ? RoutingReason::kFallback : RoutingReason::kLeastLoaded};
}

void CacheAwareDispatcher::remember(const protocol::Job& job, const std::vector<std::uint64_t>& keys,
                                    const WorkerRecord& worker) {
  // The worker that ran the latest turn holds the longest prefix of the next one.
  if (job.session) sessions_.put(*job.session, worker.identity);
  for (std::uint64_t key : keys) prefix_blocks_.put(key, worker.identity);
}

void CacheAwareDispatcher::worker_left(const std::string& identity) {
  sessions_.erase_worker(identity);
  prefix_blocks_.erase_worker(identity);
}

}  // namespace flashq
