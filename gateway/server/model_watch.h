// The gateway's view of the models served behind its brokers: every second it asks each broker
// (MODELS) and merges the answers into one ModelDirectory, noting which brokers serve each model
// so that jobs go to one of those. A broker that does not answer drops out of the view until it
// does again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gateway/openai/served_model.h"
#include "gateway/server/gateway_broker_link.h"

namespace flashq::gateway {

class ModelWatch {
 public:
  ModelWatch(std::vector<GatewayBrokerLink*> links, std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~ModelWatch();  // stop()s

  // Stops asking. Answers to questions already asked may still arrive (they only update the
  // view), so stop before the links go, and destroy the watch after them.
  void stop();

  std::shared_ptr<const ModelDirectory> directory() const;
  // A link whose broker serves `model` (round robin among them), else the first link.
  GatewayBrokerLink& link_for(const std::string& model);
  // Some broker answered within the last few intervals (with any models, or none).
  bool reachable() const;
  // Some broker answered within the last few intervals and serves at least one model.
  bool ready() const;
  // Asks every broker now and waits (up to `timeout`) for their answers: at start, so that the
  // first requests see the models.
  void refresh(std::chrono::milliseconds timeout);

 private:
  void ask_all();
  void loop();

  std::vector<GatewayBrokerLink*> links_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // Per link: its last answer's models, and when it came.
  std::vector<ModelDirectory> per_link_;
  std::vector<std::chrono::steady_clock::time_point> answered_at_;  // epoch: never
  bool answered_recently(std::size_t link, std::chrono::steady_clock::time_point now) const;
  std::shared_ptr<const ModelDirectory> merged_;
  std::uint64_t answers_ = 0;
  std::size_t next_link_ = 0;
  bool retry_soon_ = false;  // a broker never answered yet: the next round comes sooner
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace flashq::gateway
