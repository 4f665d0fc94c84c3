// The job store without Redis: jobs are admitted into this broker at once, events are kept as
// soon as they are published, requests about jobs the broker does not hold are left to it, and
// nothing is ever reported later.
#include <gtest/gtest.h>

#include <vector>

#include "broker/in_memory_job_store.h"

namespace flashq {
namespace {

TEST(InMemoryJobStore, SubmittedJobsAreAdmittedHere) {
  InMemoryJobStore store;
  const std::optional<IntakeAnswer> answer = store.submit("producer", protocol::Job{.id = "j1"});
  ASSERT_TRUE(answer.has_value()) << "answered at once";
  EXPECT_EQ(answer->kind, IntakeAnswer::Kind::kAdmit);
  EXPECT_EQ(answer->producer, "producer");
  EXPECT_EQ(answer->job.id, "j1");
}

TEST(InMemoryJobStore, EventsAndFinalsAreKeptAtOnce) {
  InMemoryJobStore store;
  const auto event = store.keep_event(protocol::Event{.id = "j1", .seq = 0}, "");
  const auto final_event =
      store.keep_event(protocol::Event{.id = "j1", .seq = 1, .final_result = protocol::FinalResult{}}, "");
  ASSERT_TRUE(event.has_value());
  ASSERT_TRUE(final_event.has_value());
  EXPECT_EQ(event->seq, 0);
  EXPECT_EQ(final_event->seq, 1);
  EXPECT_TRUE(store.collect().empty()) << "nothing comes back later";
}

TEST(InMemoryJobStore, LeavesRequestsAboutUnknownJobsToTheBroker) {
  InMemoryJobStore store;
  EXPECT_FALSE(store.status("elsewhere").has_value());
  const StoredReplay replay = store.replay(protocol::Replay{.id = "elsewhere"});
  EXPECT_FALSE(replay.answered);
  EXPECT_TRUE(replay.events.empty());
  EXPECT_FALSE(store.cancel_elsewhere("elsewhere").has_value());
  EXPECT_TRUE(store.reported().empty());
}

TEST(InMemoryJobStore, QueuedJobsDoNotOutliveTheBroker) {
  InMemoryJobStore store;
  EXPECT_FALSE(store.keeps_queued_jobs()) << "a drain waits for queued jobs too";
  EXPECT_EQ(store.connected(), std::nullopt) << "no flashq_redis_connected gauge";
  EXPECT_EQ(store.poll_fd(), -1);
  EXPECT_TRUE(store.flush(std::chrono::milliseconds(0)).empty());
}

}  // namespace
}  // namespace flashq
