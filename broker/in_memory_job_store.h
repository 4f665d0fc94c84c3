// The job store without Redis: the broker's own memory holds the jobs (JobTable) and their recent
// events (the replay buffer), so a job is admitted straight into this broker's queue and an event
// is kept as soon as it is published. Requests about jobs the broker does not hold have nothing
// to be answered from, and nothing is ever answered later.
#pragma once

#include "broker/job_store.h"

namespace flashq {

class InMemoryJobStore final : public JobStore {
 public:
  std::optional<IntakeAnswer> submit(const std::string& producer, protocol::Job job) override {
    return IntakeAnswer{.kind = IntakeAnswer::Kind::kAdmit, .producer = producer, .job = std::move(job)};
  }
  std::optional<protocol::Event> keep_event(protocol::Event event, const std::string&) override { return event; }
  void job_started(const std::string&, int64_t) override {}
  void leave_pending(const std::string&, const std::string&) override {}
  void catch_up(const std::string&, int64_t) override {}
  void follow(const std::string&) override {}
  void unfollow(const std::string&) override {}

  std::optional<protocol::StatusReply> status(const std::string&) override { return std::nullopt; }
  StoredReplay replay(const protocol::Replay&) override { return {}; }
  std::optional<RemoteCancel> cancel_elsewhere(const std::string&) override { return std::nullopt; }
  void subscription_changed(const std::string&, bool) override {}

  StoreOutcomes collect() override { return {}; }
  StoreOutcomes reported() override { return {}; }
  void turn(const StoreTurn&) override {}
  int poll_fd() const override { return -1; }
  // Nothing to read between messages: the loop wakes for timers only.
  std::chrono::milliseconds poll_timeout() const override { return std::chrono::milliseconds(50); }
  bool keeps_queued_jobs() const override { return false; }
  std::optional<bool> connected() const override { return std::nullopt; }
  StoreOutcomes flush(std::chrono::milliseconds) override { return {}; }
};

}  // namespace flashq
