#include "broker/dispatcher.h"

namespace flashq {

std::optional<Assignment> LeastLoadedDispatcher::next(JobQueue& queue, WorkerRegistry& workers, const JobTable& jobs) {
  if (queue.empty() || !workers.least_loaded()) return std::nullopt;
  WorkerRecord* worker = nullptr;
  std::optional<std::string> id = queue.pop_first([&](const std::string& candidate) {
    worker = workers.least_loaded(jobs.jobs.at(candidate).job.model);
    return worker != nullptr;
  });
  if (!id) return std::nullopt;
  return Assignment{std::move(*id), worker};
}

}  // namespace flashq
