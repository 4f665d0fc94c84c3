#include "broker/model_catalog.h"

#include <algorithm>

namespace flashq {

ModelCatalog::ModelCatalog(int64_t grace_ms, SteadyClock::time_point started, bool shared)
    : grace_(std::chrono::milliseconds(grace_ms)), started_(started), shared_(shared) {}

void ModelCatalog::note_connected(const WorkerRegistry& workers, SteadyClock::time_point now) {
  for (const auto& [identity, worker] : workers.all()) last_served_[worker.ready.model] = now;
}

void ModelCatalog::note_served_elsewhere(
    const std::vector<std::pair<std::string, SteadyClock::time_point>>& last_served, SteadyClock::time_point now) {
  for (const auto& [model, when] : last_served) {
    auto [it, added] = last_served_.try_emplace(model, when);
    if (!added) it->second = std::max(it->second, when);
  }
  shared_view_at_ = now;
}

std::optional<ModelRefusal> ModelCatalog::refusal(const protocol::Job& job, const WorkerRegistry& workers,
                                                  SteadyClock::time_point now) {
  // Jobs without a model go to any worker; a broker younger than the grace period has not yet
  // heard from the workers that may be starting with it.
  if (!job.model || grace_.count() <= 0 || within_grace(started_, now)) return std::nullopt;
  // Without a fresh view of the other brokers (the store is unreachable) a model may be served
  // there: nothing is refused on a stale view.
  if (shared_ && (!shared_view_at_ || !within_grace(*shared_view_at_, now))) return std::nullopt;
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
  return ModelRefusal{"unknown_model", "no worker" + std::string(shared_ ? " of any broker" : "") + " serves model '" +
                                           model + "'; models served: " + served_models(now)};
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

protocol::ModelsReply served_models_reply(const WorkerRegistry& workers) {
  struct Served {
    protocol::ModelInfo info;
    uint64_t newest = 0;  // registration of the worker whose formats `info` holds
  };
  std::map<std::string, Served> by_name;
  for (const auto& [identity, worker] : workers.all()) {
    const protocol::Ready& ready = worker.ready;
    auto [it, first] = by_name.try_emplace(ready.model);
    protocol::ModelInfo& info = it->second.info;
    if (first) {
      info = {.name = ready.model, .max_model_len = ready.max_model_len, .workers = 0, .slots = 0};
    } else if (info.max_model_len == 0 || ready.max_model_len == 0) {
      info.max_model_len = 0;
    } else {
      info.max_model_len = std::min(info.max_model_len, ready.max_model_len);
    }
    if (worker.registration >= it->second.newest) {
      it->second.newest = worker.registration;
      info.tool_call_format = ready.tool_call_format;
      info.reasoning_format = ready.reasoning_format;
    }
    info.workers += 1;
    info.slots += ready.slots;
  }
  protocol::ModelsReply reply;
  reply.models.reserve(by_name.size());
  for (auto& [name, served] : by_name) reply.models.push_back(std::move(served.info));
  return reply;
}

}  // namespace flashq
