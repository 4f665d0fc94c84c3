// Two brokers on one Redis, seen from the broker that does not run the job: its producer's
// CANCEL reaches the job where it runs (or before any broker takes it), and a subscriber on its
// stream socket follows a job that another broker runs, from the first event to the final.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "tests/redis/redis_cluster_fixture.h"

namespace flashq::testing {
namespace {

class RedisBrokersTest : public RedisClusterTest {
 protected:
  // Broker a has no worker, so it takes nothing from Redis; broker b (`other_`) runs every job.
  void start_two_brokers(const std::vector<std::string>& extra_flags_of_a = {}) {
    std::vector<std::string> flags_of_a = redis_flags("a");
    flags_of_a.insert(flags_of_a.end(), extra_flags_of_a.begin(), extra_flags_of_a.end());
    ASSERT_TRUE(start_broker(flags_of_a));
    std::filesystem::create_directories(scratch_.path() / "b");  // its logs apart from a's
    other_ = std::make_unique<Cluster>(scratch_.path() / "b");
    ASSERT_TRUE(other_->start_broker(redis_flags("b")));
    other_->start_worker("w1", target_dir(), drafter_dir(), 2);
    ASSERT_TRUE(other_->wait_for_workers(1));
  }

  void TearDown() override {
    if (HasFailure() && other_) std::cerr << other_->logs();
    RedisClusterTest::TearDown();
  }

  std::unique_ptr<Cluster> other_;
};

TEST_F(RedisBrokersTest, CancelOnTheOtherBrokerStopsTheJobWhereItRuns) {
  start_two_brokers();
  constexpr int64_t kLongJob = 3000;  // seconds of work: still running when the cancel comes
  const std::string prompt = long_prompt(kLongJob);
  ASSERT_FALSE(prompt.empty());
  auto client = connect_client();  // to broker a
  auto canceller = connect_client();
  ASSERT_NO_THROW(client->submit(make_job("far-1", prompt, kLongJob), 20000));
  // The submitter's stream is relayed from b through Redis: wait until tokens flow.
  std::vector<protocol::Event> events;
  protocol::FinalResult final_result;
  bool cancelled = false;
  // The worker is paused while the cancel goes in, so that the job is still running when the
  // CANCEL reaches it (the tiny model would otherwise finish in a blink on a loaded machine).
  ChildProcess& worker = other_->worker("w1");
  ASSERT_NO_THROW(final_result = client->wait(
                      "far-1",
                      [&](const protocol::Event& e) {
                        events.push_back(e);
                        if (!cancelled && !e.token_ids.empty()) {
                          cancelled = true;
                          worker.signal(SIGSTOP);
                          canceller->cancel("far-1", 20000);
                          std::this_thread::sleep_for(milliseconds(500));  // b sends the CANCEL on
                          worker.signal(SIGCONT);
                        }
                      },
                      60000));
  ASSERT_TRUE(cancelled) << "no token event reached broker a";
  EXPECT_EQ(final_result.finish_reason, protocol::FinishReason::kCancelled);
  EXPECT_TRUE(is_complete_stream(events));
  RedisClient redis(redis_->port());
  const StoredRun stored = read_run(redis, "far-1");
  EXPECT_EQ(stored.finals, 1);
  EXPECT_EQ(stored.finish_reason, "cancelled");
  EXPECT_LT(stored.tokens.size(), static_cast<size_t>(kLongJob));
  EXPECT_EQ(stored.tokens, JobRun::ids_of(events)) << "the submitter saw what Redis holds";
}

TEST_F(RedisBrokersTest, CancelBeforeAnyBrokerTookTheJobEndsItWithoutRunning) {
  ASSERT_TRUE(start_broker(redis_flags("a")));  // no worker anywhere yet: the job waits in Redis
  auto client = connect_client();
  ASSERT_NO_THROW(client->submit(make_job("early-1", "hello world", 16), 20000));
  EXPECT_NO_THROW(client->cancel("early-1", 20000));
  start_worker("w1", 2);  // now a takes the entry, finds the cancel and ends the job
  const JobRun run = wait_job(*client, "early-1", 30000);
  ASSERT_TRUE(run.final_result) << run;
  EXPECT_EQ(run.finish_reason(), "cancelled");
  EXPECT_TRUE(run.ids().empty()) << run;
  RedisClient redis(redis_->port());
  EXPECT_EQ(read_run(redis, "early-1").finish_reason, "cancelled");
  EXPECT_EQ(redis.command({"XPENDING", "flashq:jobs", "flashq"})[0], "0") << "its entry is acknowledged";
}

// docs/redis.md: a producer with only a Redis client cancels by flag and control entry.
TEST_F(RedisBrokersTest, ProducerWithOnlyARedisClientCancelsARunningJob) {
  start_two_brokers();
  constexpr int64_t kLongJob = 3000;
  const std::string prompt = long_prompt(kLongJob);
  ASSERT_FALSE(prompt.empty());
  RedisClient redis(redis_->port());
  xadd_job(redis, "redis-cancel", prompt, kLongJob);
  ASSERT_TRUE(eventually([&] { return redis.command({"XLEN", "flashq:out:{redis-cancel}"}) != std::vector<std::string>{"0"}; },
                         milliseconds(20000)))
      << "the job never started";
  // The worker is paused while the cancel goes in, so that the job is still running when the
  // CANCEL reaches it (the tiny model would otherwise finish in a blink on a loaded machine).
  ChildProcess& worker = other_->worker("w1");
  worker.signal(SIGSTOP);
  ASSERT_EQ(redis.command({"HGET", "flashq:job:{redis-cancel}", "state"}), std::vector<std::string>{"running"})
      << "the job finished before the cancel";
  redis.command({"HSET", "flashq:job:{redis-cancel}", "cancel", "1"});
  redis.command({"XADD", "flashq:control", "*", "cancel", "redis-cancel"});
  // Resumed once the broker found the cancel (its CANCEL then waits in the worker's socket).
  std::this_thread::sleep_for(milliseconds(500));
  worker.signal(SIGCONT);
  ASSERT_TRUE(wait_finals({"redis-cancel"}, milliseconds(20000)));
  const StoredRun stored = read_run(redis, "redis-cancel");
  EXPECT_EQ(stored.finish_reason, "cancelled");
  EXPECT_LT(stored.tokens.size(), static_cast<size_t>(kLongJob));
}

TEST_F(RedisBrokersTest, CancelOfAnIdNoBrokerKnowsIsNotFound) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  auto client = connect_client();
  try {
    client->cancel("nobody-knows", 20000);
    ADD_FAILURE() << "cancel of an unknown id succeeded";
  } catch (const BrokerError& e) {
    EXPECT_EQ(e.wire_code(), "not_found") << e.what();
  }
}

// Reads a subscriber's events until the final one (or 20 s of silence).
std::vector<protocol::Event> follow_to_final(StreamSubscriber& subscriber) {
  std::vector<protocol::Event> events;
  while (std::optional<protocol::Event> event = subscriber.next(20000)) {
    events.push_back(*event);
    if (event->final_result) break;
  }
  return events;
}

TEST_F(RedisBrokersTest, SubscriberOnTheOtherBrokerFollowsTheJobToItsFinal) {
  start_two_brokers();
  constexpr int64_t kTokens = 300;
  const std::string prompt = "job 7: the queue hums";
  const Reference want = reference(prompt, kTokens);
  RedisClient redis(redis_->port());
  xadd_job(redis, "follow-1", prompt, kTokens);
  // Here the subscriber comes once b has taken the job (it may have finished already).
  ASSERT_TRUE(eventually(
      [&] { return redis.command({"HGET", "flashq:job:{follow-1}", "state"}) != std::vector<std::string>{"(nil)"}; },
      milliseconds(20000)));
  auto client = connect_client();  // to broker a, which knows nothing of the job
  StreamSubscriber subscriber = client->subscribe("follow-1");
  const std::vector<protocol::Event> events = follow_to_final(subscriber);
  ASSERT_FALSE(events.empty()) << "nothing relayed to the subscriber";
  ASSERT_TRUE(events.back().final_result) << "no final event";
  EXPECT_TRUE(is_complete_stream(events)) << "the relay starts at seq 0 and has no gap";
  EXPECT_EQ(JobRun::ids_of(events), want.tokens);
  EXPECT_EQ(JobRun::text_of(events), want.text);
  EXPECT_TRUE(matches(read_run(redis, "follow-1"), want));
}

// docs/protocol.md: a producer that wants every event subscribes before it submits. With two
// brokers the subscription may reach one that Redis has not told of the job yet.
TEST_F(RedisBrokersTest, SubscriberBeforeTheJobExistsFollowsItOnceSubmittedElsewhere) {
  start_two_brokers();
  constexpr int64_t kTokens = 300;
  const std::string prompt = "job 8: the queue hums";
  const Reference want = reference(prompt, kTokens);
  auto client = connect_client();  // to broker a
  StreamSubscriber subscriber = client->subscribe("early-sub-1");
  std::this_thread::sleep_for(milliseconds(300));  // a asks Redis, which knows nothing yet
  RedisClient redis(redis_->port());
  ASSERT_EQ(redis.command({"EXISTS", "flashq:job:{early-sub-1}"}), std::vector<std::string>{"0"});
  xadd_job(redis, "early-sub-1", prompt, kTokens);  // b takes and runs it
  const std::vector<protocol::Event> events = follow_to_final(subscriber);
  ASSERT_FALSE(events.empty()) << "nothing relayed to the early subscriber";
  ASSERT_TRUE(events.back().final_result) << "no final event";
  EXPECT_TRUE(is_complete_stream(events));
  EXPECT_EQ(JobRun::ids_of(events), want.tokens);
  EXPECT_EQ(JobRun::text_of(events), want.text);
}

// docs/protocol.md 9.4, docs/redis.md "Models across brokers": with Redis a broker does not reject
// a job for a model its own workers do not serve when another broker's do; a model no broker
// serves is rejected.
TEST_F(RedisBrokersTest, ABrokerWithoutWorkersForAModelDoesNotRejectJobsAnotherBrokerServes) {
  start_two_brokers({"--unknown-model-grace-ms", "100"});
  std::this_thread::sleep_for(milliseconds(300));  // a is past its grace period, with no worker at all
  auto client = connect_client();                   // to broker a
  protocol::Job job = make_job("elsewhere-1", "hello world", 8);
  job.model = target_dir().filename().string();  // what b's worker serves
  ASSERT_NO_THROW(client->submit(job, 20000)) << "broker a rejected a job broker b serves";
  const JobRun run = wait_job(*client, "elsewhere-1", 30000);
  ASSERT_TRUE(run.final_result) << run;
  EXPECT_TRUE(run.finish_reason() == "length" || run.finish_reason() == "stop") << run;
  protocol::Job unknown = make_job("nobody-serves", "hello world", 8);
  unknown.model = "absent";
  try {
    client->submit(unknown, 20000);
    ADD_FAILURE() << "a job for a model no broker serves was accepted";
  } catch (const JobRejected& e) {
    EXPECT_EQ(e.reason(), "unknown_model") << e.what();
  }
}

}  // namespace
}  // namespace flashq::testing
