// The job store without Redis: jobs are admitted into this broker at once, events go out as soon
// as they are published, and requests about jobs the broker does not hold are left to it.
#include <gtest/gtest.h>

#include <vector>

#include "broker/in_memory_job_store.h"

namespace flashq {
namespace {

// Records what the store asks of the broker.
class RecordingCore final : public BrokerCore {
 public:
  std::vector<std::string> admitted;
  std::vector<int64_t> delivered_seqs;

  void admit(const std::string&, protocol::Job job) override { admitted.push_back(job.id); }
  void reply(const std::string&, const protocol::WireMessage&) override { ADD_FAILURE() << "no replies expected"; }
  void relay(JobRecord&, protocol::Event) override { ADD_FAILURE() << "nothing to relay from memory"; }
  void deliver(JobRecord&, const protocol::Event& event) override { delivered_seqs.push_back(event.seq); }
  void finish(JobRecord&, protocol::FinalResult) override {}
  void dispatch() override {}
  void cancel(JobRecord&) override {}
  void withdraw(JobRecord&) override { ADD_FAILURE() << "no other broker takes a job over"; }
  void store_state_changed() override {}
  void models_served_elsewhere(const std::vector<std::pair<std::string, SteadyClock::time_point>>&) override {}
  bool draining() const override { return false; }
};

TEST(InMemoryJobStore, SubmittedJobsAreAdmittedHere) {
  RecordingCore core;
  InMemoryJobStore store(core);
  store.submit("producer", protocol::Job{.id = "j1"});
  EXPECT_EQ(core.admitted, std::vector<std::string>{"j1"});
}

TEST(InMemoryJobStore, EventsAndFinalsAreDeliveredAtOnce) {
  RecordingCore core;
  InMemoryJobStore store(core);
  JobRecord job;
  store.store_event(job, protocol::Event{.id = "j1", .seq = 0});
  store.store_event(job, protocol::Event{.id = "j1", .seq = 1, .final_result = protocol::FinalResult{}});
  EXPECT_EQ(core.delivered_seqs, (std::vector<int64_t>{0, 1}));
}

TEST(InMemoryJobStore, LeavesRequestsAboutUnknownJobsToTheBroker) {
  RecordingCore core;
  InMemoryJobStore store(core);
  EXPECT_FALSE(store.answer_status("producer", protocol::Status{.id = "elsewhere"}));
  EXPECT_FALSE(store.answer_replay("producer", protocol::Replay{.id = "elsewhere"}));
  EXPECT_FALSE(store.cancel_elsewhere("producer", "elsewhere"));
}

TEST(InMemoryJobStore, QueuedJobsDoNotOutliveTheBroker) {
  RecordingCore core;
  InMemoryJobStore store(core);
  EXPECT_FALSE(store.keeps_queued_jobs()) << "a drain waits for queued jobs too";
  EXPECT_EQ(store.connected(), std::nullopt) << "no flashq_redis_connected gauge";
  EXPECT_EQ(store.poll_fd(), -1);
}

}  // namespace
}  // namespace flashq
