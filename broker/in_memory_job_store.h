// The job store without Redis: the broker's own memory holds the jobs (JobTable) and their recent
// events (the replay buffer), so a job is admitted straight into this broker's queue and an event
// is delivered as soon as it is published. Requests about jobs the broker does not hold have
// nothing to be answered from.
#pragma once

#include "broker/job_store.h"

namespace flashq {

class InMemoryJobStore final : public JobStore {
 public:
  explicit InMemoryJobStore(BrokerCore& core) : core_(core) {}

  void submit(const std::string& producer, protocol::Job job) override { core_.admit(producer, std::move(job)); }
  void store_event(JobRecord& job, protocol::Event event) override { core_.deliver(job, event); }
  void job_started(const std::string&, int64_t) override {}

  bool answer_status(const std::string&, const protocol::Status&) override { return false; }
  bool answer_replay(const std::string&, const protocol::Replay&) override { return false; }
  bool cancel_elsewhere(const std::string&, const std::string&) override { return false; }
  void subscription_changed(const std::string&, bool) override {}

  void turn() override {}
  int poll_fd() const override { return -1; }
  // Nothing to read between messages: the loop wakes for timers only.
  std::chrono::milliseconds poll_timeout() const override { return std::chrono::milliseconds(50); }
  bool keeps_queued_jobs() const override { return false; }
  std::optional<bool> connected() const override { return std::nullopt; }
  void flush(std::chrono::milliseconds) override {}

 private:
  BrokerCore& core_;
};

}  // namespace flashq
