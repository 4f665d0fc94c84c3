#include "broker/dispatcher.h"

namespace flashq {

std::optional<Assignment> LeastLoadedDispatcher::next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) {
  if (queue.empty() || !workers.least_loaded()) return std::nullopt;
  WorkerRecord* worker = nullptr;
  std::optional<std::string> id = queue.pop_first([&](const std::string& candidate) {
    const protocol::Job& job = jobs.jobs.at(candidate).job;
    // spec dflash: a free worker with a drafter first; else any, which runs it target-only
    // (docs/protocol.md 9.4: the output is the same, only slower).
    worker = job.spec == protocol::SpecMode::kDflash ? workers.least_loaded(job.model, true) : nullptr;
    if (!worker) worker = workers.least_loaded(job.model);
    return worker != nullptr;
  });
  if (!id) return std::nullopt;
  return Assignment{std::move(*id), worker};
}

}  // namespace flashq
