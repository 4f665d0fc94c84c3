#include "broker/worker_registry.h"

namespace flashq {

WorkerRecord& WorkerRegistry::add(const std::string& identity, protocol::Ready ready, SteadyClock::time_point now) {
  WorkerRecord& worker = workers_[identity];
  worker.identity = identity;
  worker.ready = std::move(ready);
  worker.last_seen = now;
  worker.registration = ++registrations_;
  return worker;
}

std::set<std::string> WorkerRegistry::remove(const std::string& identity) {
  auto it = workers_.find(identity);
  if (it == workers_.end()) return {};
  std::set<std::string> jobs = std::move(it->second.jobs);
  workers_.erase(it);
  return jobs;
}

WorkerRecord* WorkerRegistry::find(const std::string& identity) {
  auto it = workers_.find(identity);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerRecord* WorkerRegistry::least_loaded(const std::optional<std::string>& model, bool with_drafter) {
  WorkerRecord* best = nullptr;
  double best_load = 0;
  for (auto& [identity, worker] : workers_) {
    if (worker.free_slots() <= 0 || (model && worker.ready.model != *model)) continue;
    if (with_drafter && worker.ready.block_size <= 0) continue;
    const double load = static_cast<double>(worker.jobs.size()) / static_cast<double>(worker.ready.slots);
    if (!best || load < best_load) {
      best = &worker;
      best_load = load;
    }
  }
  return best;
}

std::vector<std::string> WorkerRegistry::expired(SteadyClock::time_point oldest_allowed) const {
  std::vector<std::string> dead;
  for (const auto& [identity, worker] : workers_) {
    if (worker.last_seen < oldest_allowed) dead.push_back(identity);
  }
  return dead;
}

}  // namespace flashq
