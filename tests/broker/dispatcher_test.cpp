// The scheduling policy on its own (docs/protocol.md §9.4): queue order, the least-loaded worker
// serving the job's model, never more jobs than a worker's free slots.
#include <gtest/gtest.h>

#include "broker/dispatcher.h"

namespace flashq {
namespace {

class DispatcherFixture : public ::testing::Test {
 protected:
  void add_worker(const std::string& identity, const std::string& model, int64_t slots) {
    workers_.add(identity, protocol::Ready{.worker_id = identity, .model = model, .slots = slots}, SteadyClock::now());
  }
  void queue_job(const std::string& id, int64_t priority = 0, std::optional<std::string> model = std::nullopt) {
    JobRecord record;
    record.job.id = id;
    record.job.priority = priority;
    record.job.model = std::move(model);
    jobs_.jobs.emplace(id, std::move(record));
    ASSERT_TRUE(queue_.push_back(id, priority, 1));
  }
  // The next assignment as "job@worker", taking the slot as the broker does; "" when none.
  std::string next() {
    std::optional<Assignment> assignment = dispatcher_.next(queue_, workers_, jobs_);
    if (!assignment) return "";
    assignment->worker->jobs.insert(assignment->job_id);
    return assignment->job_id + "@" + assignment->worker->identity;
  }

  JobQueue queue_{QueueLimits{}};
  WorkerRegistry workers_;
  JobTable jobs_;
  LeastLoadedDispatcher dispatcher_;
};

TEST_F(DispatcherFixture, NothingToAssignWithoutWorkersOrJobs) {
  queue_job("a");
  EXPECT_EQ(next(), "");
  EXPECT_EQ(queue_.size(), 1) << "a job with no worker stays queued";
  queue_.remove("a");
  add_worker("w", "m", 1);
  EXPECT_EQ(next(), "");
}

TEST_F(DispatcherFixture, JobsGoInPriorityOrderThenFifo) {
  add_worker("w", "m", 8);
  queue_job("late", 5);
  queue_job("first", 0);
  queue_job("second", 0);
  EXPECT_EQ(next(), "first@w");
  EXPECT_EQ(next(), "second@w");
  EXPECT_EQ(next(), "late@w");
  EXPECT_EQ(next(), "");
}

TEST_F(DispatcherFixture, EachJobGoesToTheLeastLoadedWorker) {
  add_worker("big", "m", 4);
  add_worker("small", "m", 2);
  for (const char* id : {"a", "b", "c", "d"}) queue_job(id);
  // Load is the share of a worker's slots in use; a tie goes to the first worker by identity.
  EXPECT_EQ(next(), "a@big");    // 0/4 vs 0/2
  EXPECT_EQ(next(), "b@small");  // 1/4 vs 0/2
  EXPECT_EQ(next(), "c@big");    // 1/4 vs 1/2
  EXPECT_EQ(next(), "d@big");    // 2/4 vs 1/2
}

TEST_F(DispatcherFixture, NeverMoreJobsThanFreeSlots) {
  add_worker("w", "m", 2);
  for (const char* id : {"a", "b", "c"}) queue_job(id);
  EXPECT_EQ(next(), "a@w");
  EXPECT_EQ(next(), "b@w");
  EXPECT_EQ(next(), "");
  EXPECT_EQ(queue_.size(), 1);
}

TEST_F(DispatcherFixture, AJobWhoseModelNoFreeWorkerServesDoesNotHoldUpTheOthers) {
  add_worker("w", "small-model", 4);
  queue_job("needs-big", 0, "big-model");
  queue_job("any", 1);
  queue_job("needs-small", 2, "small-model");
  EXPECT_EQ(next(), "any@w");
  EXPECT_EQ(next(), "needs-small@w");
  EXPECT_EQ(next(), "");
  EXPECT_EQ(queue_.size(), 1) << "needs-big waits for a worker of its model";
}

}  // namespace
}  // namespace flashq
