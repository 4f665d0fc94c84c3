#include "broker/model_catalog.h"

namespace flashq {

ModelCatalog::ModelCatalog(int64_t grace_ms, SteadyClock::time_point started)
    : grace_(std::chrono::milliseconds(grace_ms)), started_(started) {}

void ModelCatalog::note_connected(const WorkerRegistry& workers, SteadyClock::time_point now) {
  for (const auto& [identity, worker] : workers.all()) last_served_[worker.ready.model] = now;
}

std::optional<ModelRefusal> ModelCatalog::refusal(const protocol::Job& job, const WorkerRegistry& workers,
                                                  SteadyClock::time_point now) {
  // Jobs without a model go to any worker; a broker younger than the grace period has not yet
  // heard from the workers that may be starting with it.
  if (!job.model || grace_.count() <= 0 || within_grace(started_, now)) return std::nullopt;
  const std::string& model = *job.model;
  const auto served_recently = [&] {
    auto served = last_served_.find(model);
    return served != last_served_.end() && within_grace(served->second, now);
  };
  // The timers ask about every queued job: only a job about to be refused costs a look at every
  // worker (one that connected since the last note may serve it).
  if (served_recently()) return std::nullopt;
  note_connected(workers, now);
  if (served_recently()) return std::nullopt;
  return ModelRefusal{"unknown_model", "no worker serves model '" + model + "'; models served: " + served_models(now)};
}

std::string ModelCatalog::served_models(SteadyClock::time_point now) const {
  std::string list;
  for (const auto& [model, last] : last_served_) {
    if (!within_grace(last, now)) continue;
    if (!list.empty()) list += ", ";
    list += model;
  }
  return list.empty() ? "none" : list;
}

}  // namespace flashq
