// The workers attached to the backend: what each serves, its free slots, the jobs it runs and
// when it was last heard from. Dispatch picks the least-loaded worker with a free slot.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/job_record.h"
#include "shared/protocol/worker_messages.h"

namespace flashq {

struct WorkerRecord {
  std::string identity;  // ROUTER identity
  protocol::Ready ready;
  std::set<std::string> jobs;
  SteadyClock::time_point last_seen;
  uint64_t registration = 0;  // order of registration in this broker: the later, the larger
  int64_t free_slots() const { return ready.slots - static_cast<int64_t>(jobs.size()); }
};

class WorkerRegistry {
 public:
  WorkerRecord& add(const std::string& identity, protocol::Ready ready, SteadyClock::time_point now);
  // Removes the worker; returns the jobs it was running.
  std::set<std::string> remove(const std::string& identity);
  WorkerRecord* find(const std::string& identity);
  // The worker with a free slot and the lowest share of its slots in use, among those serving
  // `model` when one is named, and among those with a drafter when `with_drafter`.
  WorkerRecord* least_loaded(const std::optional<std::string>& model = std::nullopt, bool with_drafter = false);
  // Workers not heard from since `oldest_allowed`.
  std::vector<std::string> expired(SteadyClock::time_point oldest_allowed) const;
  const std::map<std::string, WorkerRecord>& all() const { return workers_; }

 private:
  std::map<std::string, WorkerRecord> workers_;
  uint64_t registrations_ = 0;
};

}  // namespace flashq
