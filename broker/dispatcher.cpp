#include "broker/dispatcher.h"

namespace flashq {

std::string_view routing_reason_name(RoutingReason reason) {
  switch (reason) {
    case RoutingReason::kSession: return "session";
    case RoutingReason::kPrefix: return "prefix";
    case RoutingReason::kLeastLoaded: return "least_loaded";
    case RoutingReason::kFallback: return "fallback";
  }
  return "least_loaded";
}

WorkerRecord* least_loaded_for(const protocol::Job& job, WorkerRegistry& workers) {
  // spec dflash: a free worker with a drafter first; else any, which runs it target-only
  // (docs/protocol.md 9.4: the output is the same, only slower).
  WorkerRecord* worker = job.spec == protocol::SpecMode::kDflash ? workers.least_loaded(job.model, true) : nullptr;
  return worker ? worker : workers.least_loaded(job.model);
}

std::optional<Assignment> LeastLoadedDispatcher::next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) {
  if (queue.empty() || !workers.least_loaded()) return std::nullopt;
  WorkerRecord* worker = nullptr;
  std::optional<std::string> id = queue.pop_first([&](const std::string& candidate) {
    worker = least_loaded_for(jobs.jobs.at(candidate).job, workers);
    return worker != nullptr;
  });
  if (!id) return std::nullopt;
  return Assignment{std::move(*id), worker, RoutingReason::kLeastLoaded};
}

}  // namespace flashq
