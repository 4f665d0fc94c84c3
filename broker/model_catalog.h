// Which models this broker's workers serve, and since when none has (docs/protocol.md §9.4,
// "Unknown models"). A job naming a model that no connected worker serves, and that no worker has
// served for the grace period, cannot be run here: the broker rejects it instead of letting it wait
// for its deadline. The grace period is counted from the last worker of the model (and from the
// broker's start), so workers that reconnect, or connect just after the broker starts, lose nothing.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/worker_registry.h"
#include "shared/protocol/job.h"
#include "shared/protocol/model_messages.h"

namespace flashq {

// Why a job cannot be served: a REJECTED `reason`, and the text listing what is served.
struct ModelRefusal {
  std::string reason;   // "unknown_model"
  std::string message;  // names the job's model and the models served
};

class ModelCatalog {
 public:
  // grace_ms <= 0 turns the rule off: jobs naming an unserved model wait for their deadline.
  // `shared`: brokers share one store (Redis), and a model another broker serves is served; then
  // nothing is refused unless that view of the others is fresh (noted within the grace period).
  ModelCatalog(int64_t grace_ms, SteadyClock::time_point started, bool shared = false);

  // Every connected worker's model is served as of `now`.
  void note_connected(const WorkerRegistry& workers, SteadyClock::time_point now);
  // The other brokers' view, as of `now`: `model` was last served at `when`.
  void note_served_elsewhere(const std::vector<std::pair<std::string, SteadyClock::time_point>>& last_served,
                             SteadyClock::time_point now);
  // Why `job` cannot be served, as of `now` (noting the connected workers before refusing); none
  // when it can, or may yet be.
  std::optional<ModelRefusal> refusal(const protocol::Job& job, const WorkerRegistry& workers,
                                      SteadyClock::time_point now);
  // "a, b, c" (sorted), or "none": the models a connected worker serves or one did within grace.
  std::string served_models(SteadyClock::time_point now) const;

 private:
  bool within_grace(SteadyClock::time_point since, SteadyClock::time_point now) const {
    return now - since < grace_;
  }

  std::chrono::milliseconds grace_;
  SteadyClock::time_point started_;
  const bool shared_;
  std::optional<SteadyClock::time_point> shared_view_at_;  // when the other brokers' view last came
  std::map<std::string, SteadyClock::time_point> last_served_;  // per model: last seen connected
};

// The MODELS_REPLY for the connected workers: each model once, sorted by name, with the smallest
// context length its workers report (0, unknown, when one of them reports none: a request must
// fit every worker it may be dispatched to), the output formats of its most recently registered
// worker (the newest deployment), and its workers and slots counted.
protocol::ModelsReply served_models_reply(const WorkerRegistry& workers);

}  // namespace flashq
