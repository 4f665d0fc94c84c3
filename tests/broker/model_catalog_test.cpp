// Which jobs the broker can serve by model (broker/model_catalog.h, docs/protocol.md §9.4): a job
// naming a model no worker has served for the grace period is refused `unknown_model`; and where
// `spec: dflash` jobs go (a worker with a drafter first, never a refusal).
#include <gtest/gtest.h>

#include "broker/dispatcher.h"
#include "broker/model_catalog.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;

class ModelCatalogTest : public ::testing::Test {
 protected:
  void add_worker(const std::string& identity, const std::string& model, int64_t block_size = 0) {
    workers_.add(identity,
                 protocol::Ready{.worker_id = identity, .model = model, .slots = 1, .block_size = block_size},
                 start_);
  }
  static protocol::Job job_for(std::optional<std::string> model) {
    protocol::Job job;
    job.id = "j";
    job.model = std::move(model);
    return job;
  }

  const SteadyClock::time_point start_ = SteadyClock::now();
  WorkerRegistry workers_;
  ModelCatalog catalog_{1000, start_};
};

TEST_F(ModelCatalogTest, NothingIsRefusedWithinTheGracePeriodAfterStart) {
  EXPECT_FALSE(catalog_.refusal(job_for("absent"), workers_, start_));
  EXPECT_FALSE(catalog_.refusal(job_for("absent"), workers_, start_ + 999ms));
  EXPECT_TRUE(catalog_.refusal(job_for("absent"), workers_, start_ + 1000ms));
}

TEST_F(ModelCatalogTest, AModelNoWorkerServesIsRefusedWithTheModelsServed) {
  add_worker("w1", "qwen");
  add_worker("w2", "llama");
  std::optional<ModelRefusal> refusal = catalog_.refusal(job_for("absent"), workers_, start_ + 2s);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->reason, "unknown_model");
  EXPECT_EQ(refusal->message, "no worker serves model 'absent'; models served: llama, qwen");
}

TEST_F(ModelCatalogTest, RefusalWithNoWorkerAtAllSaysNone) {
  std::optional<ModelRefusal> refusal = catalog_.refusal(job_for("absent"), workers_, start_ + 2s);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message, "no worker serves model 'absent'; models served: none");
}

// Brokers sharing Redis: a model another broker serves is served; and nothing is refused while
// the view of the other brokers is stale (the store unreachable) or not there yet.
TEST_F(ModelCatalogTest, SharedAModelAnotherBrokerServesIsServedAndAStaleViewRefusesNothing) {
  ModelCatalog shared(1000, start_, /*shared=*/true);
  EXPECT_FALSE(shared.refusal(job_for("absent"), workers_, start_ + 2s)) << "no view of the others yet";
  shared.note_served_elsewhere({{"big", start_ + 2s}}, start_ + 2s);
  EXPECT_FALSE(shared.refusal(job_for("big"), workers_, start_ + 2500ms)) << "served by another broker";
  std::optional<ModelRefusal> refusal = shared.refusal(job_for("absent"), workers_, start_ + 2500ms);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message, "no worker of any broker serves model 'absent'; models served: big");
  EXPECT_FALSE(shared.refusal(job_for("absent"), workers_, start_ + 3500ms)) << "the view is older than the grace";
  shared.note_served_elsewhere({{"big", start_ + 2s}}, start_ + 3500ms);
  EXPECT_TRUE(shared.refusal(job_for("big"), workers_, start_ + 3500ms)) << "unserved elsewhere for the grace period";
}

TEST_F(ModelCatalogTest, AModelAConnectedWorkerServesIsNotRefused) {
  add_worker("w1", "qwen");
  EXPECT_FALSE(catalog_.refusal(job_for("qwen"), workers_, start_ + 10s));
}

TEST_F(ModelCatalogTest, AModelStaysServedForTheGracePeriodAfterItsLastWorkerLeft) {
  add_worker("w1", "qwen");
  catalog_.note_connected(workers_, start_ + 5s);
  workers_.remove("w1");
  EXPECT_FALSE(catalog_.refusal(job_for("qwen"), workers_, start_ + 5s + 999ms));
  EXPECT_EQ(catalog_.served_models(start_ + 5s + 999ms), "qwen");
  std::optional<ModelRefusal> refusal = catalog_.refusal(job_for("qwen"), workers_, start_ + 6s);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message, "no worker serves model 'qwen'; models served: none");
}

TEST_F(ModelCatalogTest, JobsWithoutAModelAreNeverRefused) {
  EXPECT_FALSE(catalog_.refusal(job_for(std::nullopt), workers_, start_ + 1h));
}

TEST_F(ModelCatalogTest, ZeroGraceTurnsTheRuleOff) {
  ModelCatalog off(0, start_);
  EXPECT_FALSE(off.refusal(job_for("absent"), workers_, start_ + 1h));
}

// spec dflash in dispatch: a drafter is preferred, never required.
class DflashDispatchTest : public ModelCatalogTest {
 protected:
  void queue_job(const std::string& id, protocol::SpecMode spec) {
    JobRecord record;
    record.job.id = id;
    record.job.spec = spec;
    jobs_.jobs.emplace(id, std::move(record));
    ASSERT_TRUE(queue_.push_back(id, 0, 1));
  }
  std::string next() {
    std::optional<Assignment> assignment = dispatcher_.next(queue_, workers_, jobs_);
    if (!assignment) return "";
    assignment->worker->jobs.insert(assignment->job_id);
    return assignment->job_id + "@" + assignment->worker->identity;
  }

  JobQueue queue_{QueueLimits{}};
  JobTable jobs_;
  LeastLoadedDispatcher dispatcher_;
};

TEST_F(DflashDispatchTest, ADflashJobGoesToAFreeWorkerWithADrafter) {
  add_worker("a-plain", "m");  // first by identity: an auto job would go here
  add_worker("b-drafter", "m", 16);
  queue_job("d", protocol::SpecMode::kDflash);
  EXPECT_EQ(next(), "d@b-drafter");
}

TEST_F(DflashDispatchTest, ADflashJobRunsWithoutADrafterWhenNoWorkerWithOneIsFree) {
  add_worker("a-plain", "m");
  add_worker("b-drafter", "m", 16);
  queue_job("d1", protocol::SpecMode::kDflash);
  queue_job("d2", protocol::SpecMode::kDflash);
  EXPECT_EQ(next(), "d1@b-drafter");
  EXPECT_EQ(next(), "d2@a-plain") << "a dflash job never waits for a drafter";
}

TEST_F(DflashDispatchTest, AnAutoJobIgnoresDrafters) {
  add_worker("a-plain", "m");
  add_worker("b-drafter", "m", 16);
  queue_job("auto", protocol::SpecMode::kAuto);
  EXPECT_EQ(next(), "auto@a-plain");
}

}  // namespace
}  // namespace flashq
