// Brokers with different models on one Redis (docs/redis.md, "Models across brokers"): a job runs
// on a broker with a worker for its model, whichever broker a producer submits it to or reads it
// first; a job naming a model no broker serves is rejected after the grace period, over ZeroMQ
// and when written straight into Redis.
#include <gtest/gtest.h>

#include <thread>

#include "tests/redis/redis_cluster_fixture.h"

namespace flashq::testing {
namespace {

constexpr int64_t kGraceMs = 800;

class RedisModelBrokersTest : public RedisClusterTest {
 protected:
  // Broker a's worker serves the tiny target as "model-a", broker b's as "model-b".
  void start_two_models(int64_t grace_ms = kGraceMs) {
    grace_ms_ = grace_ms;
    ASSERT_TRUE(start_broker(flags("a")));
    start_worker("wa", 2, {"--model-name", "model-a"});
    ASSERT_TRUE(cluster_->wait_for_workers(1));
    std::filesystem::create_directories(scratch_.path() / "b");
    other_ = std::make_unique<Cluster>(scratch_.path() / "b");
    ASSERT_TRUE(other_->start_broker(flags("b")));
    other_->start_worker("wb", target_dir(), drafter_dir(), 2, {"--model-name", "model-b"});
    ASSERT_TRUE(other_->wait_for_workers(1));
  }

  std::vector<std::string> flags(const std::string& consumer) const {
    std::vector<std::string> out = redis_flags(consumer);
    out.insert(out.end(), {"--unknown-model-grace-ms", std::to_string(grace_ms_)});
    return out;
  }

  std::unique_ptr<Client> connect_client_to(Cluster& cluster) {
    auto client = std::make_unique<Client>();
    client->connect(cluster.frontend(), cluster.stream());
    return client;
  }

  void TearDown() override {
    if (HasFailure() && other_) std::cerr << other_->logs();
    RedisClusterTest::TearDown();
  }

  std::unique_ptr<Cluster> other_;
  int64_t grace_ms_ = kGraceMs;
};

TEST_F(RedisModelBrokersTest, EveryJobRunsOnABrokerServingItsModel) {
  start_two_models();
  const std::vector<std::string> texts = prompts(12);
  const std::vector<Reference> want = references(texts, 10);
  auto to_a = connect_client();
  auto to_b = connect_client_to(*other_);
  RedisClient redis(redis_->port());
  std::vector<std::string> ids;
  std::map<std::string, std::string> model_of;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string id = "mb-" + std::to_string(i);
    const std::string model = i % 2 == 0 ? "model-a" : "model-b";
    ids.push_back(id);
    model_of[id] = model;
    if (i % 3 == 2) {  // a producer with only a Redis client
      xadd_job(redis, id, texts[i], 10, {"model", model});
      continue;
    }
    protocol::Job job = make_job(id, texts[i], 10);
    job.model = model;
    ASSERT_NO_THROW((i % 3 == 0 ? to_a : to_b)->submit(job, 20000)) << id;
  }
  ASSERT_TRUE(wait_finals(ids, milliseconds(60000)));
  for (size_t i = 0; i < ids.size(); ++i) {
    SCOPED_TRACE(ids[i]);
    EXPECT_TRUE(matches(read_run(redis, ids[i]), want[i]));
    const std::string owner = redis.command({"HGET", "flashq:job:{" + ids[i] + "}", "owner"}).at(0);
    EXPECT_EQ(owner, model_of[ids[i]] == "model-a" ? "a" : "b") << "run by the broker serving " << model_of[ids[i]];
  }
}

TEST_F(RedisModelBrokersTest, AJobForAModelNobodyServesIsRejectedAfterTheGracePeriod) {
  start_two_models();
  std::this_thread::sleep_for(milliseconds(kGraceMs + 700));  // past each broker's start
  auto client = connect_client();
  try {
    protocol::Job job = make_job("absent-1", "hello world", 8);
    job.model = "absent";
    client->submit(job, 20000);
    ADD_FAILURE() << "a job for a model no broker serves was accepted";
  } catch (const JobRejected& e) {
    EXPECT_EQ(e.reason(), "unknown_model") << e.what();
    EXPECT_NE(std::string(e.what()).find("model-b"), std::string::npos) << "names what is served: " << e.what();
  }
  // Over ZeroMQ a model served only by the other broker is accepted and runs there.
  protocol::Job elsewhere = make_job("elsewhere-1", "hello world", 8);
  elsewhere.model = "model-b";
  const JobRun run = run_job(*client, elsewhere);
  ASSERT_TRUE(run.final_result) << run;
  EXPECT_TRUE(run.finish_reason() == "length" || run.finish_reason() == "stop") << run;

  // Written straight into Redis: sorted into the model's stream, then rejected by a broker that
  // reads the streams of models nobody serves.
  RedisClient redis(redis_->port());
  xadd_job(redis, "absent-2", "hello world", 8, {"model", "absent"});
  ASSERT_TRUE(wait_finals({"absent-2"}, milliseconds(20000)));
  const StoredRun stored = read_run(redis, "absent-2");
  EXPECT_EQ(stored.finals, 1);
  EXPECT_EQ(stored.finish_reason, "rejected");
  EXPECT_NE(stored.error.find("absent"), std::string::npos) << stored.error;
  EXPECT_EQ(redis.command({"XLEN", "flashq:model:absent:jobs"}), std::vector<std::string>{"0"}) << "acknowledged";
}

TEST_F(RedisModelBrokersTest, AModelWhoseLastWorkerLeftIsNotRejectedWithinTheGracePeriod) {
  start_two_models(8000);  // longer than a worker takes to come back
  other_->worker("wb").kill_now();  // b's worker of model-b dies: nobody serves model-b now
  ASSERT_TRUE(other_->wait_for_workers(0));
  RedisClient redis(redis_->port());
  xadd_job(redis, "late-1", "hello world", 8, {"model", "model-b"});
  std::this_thread::sleep_for(milliseconds(500));
  other_->start_worker("wb", target_dir(), drafter_dir(), 2, {"--model-name", "model-b"});  // back in time
  ASSERT_TRUE(wait_finals({"late-1"}, milliseconds(30000)));
  const StoredRun stored = read_run(redis, "late-1");
  EXPECT_TRUE(stored.finish_reason == "length" || stored.finish_reason == "stop") << stored.finish_reason << " "
                                                                                    << stored.error;
}

}  // namespace
}  // namespace flashq::testing
