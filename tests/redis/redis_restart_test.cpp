// A broker on Redis killed and restarted under the same consumer name while its job runs: the
// restarted broker takes its own pending entry back, finishes the job as a continuation, and
// every figure it reports (STATUS, the final event, the stored final) counts from what Redis
// holds, never from a time the new process made up.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "tests/redis/redis_cluster_fixture.h"
#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

using RedisRestartTest = RedisClusterTest;

// What a strict decoder already refuses (negative figures) is taken as given; these are the
// relations between the figures of one job. (Queue time and time to first token are not ordered:
// a continuation's queue time adds its last attempt's wait in the worker to the first assignment.)
void expect_consistent(const protocol::Timings& t, int64_t at_least_total_ms, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_GE(t.queue_ms, 0);
  EXPECT_LE(t.queue_ms, t.total_ms);
  EXPECT_GT(t.ttft_ms, 0) << "the job streamed tokens";
  EXPECT_LE(t.ttft_ms, t.total_ms);
  EXPECT_GE(t.total_ms, at_least_total_ms) << "the job ran across the restart";
  EXPECT_LT(t.total_ms, 600000) << "a figure counted from the clock's zero";
}

TEST_F(RedisRestartTest, BrokerKilledMidJobFinishesItAfterRestartWithFiguresFromRedis) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  ChildProcess& worker = start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  constexpr int64_t kTokens = 1200;
  const std::string prompt = long_prompt(kTokens);
  ASSERT_FALSE(prompt.empty());
  const Reference want = reference(prompt, kTokens);
  const auto submitted = Clock::now();
  RedisClient redis(redis_->port());
  xadd_job(redis, "restart-1", prompt, kTokens);
  // Mid-job: tokens stored, the final not. The worker is paused there, so the job is still
  // running when its broker dies (the tiny model would otherwise finish in a blink).
  ASSERT_TRUE(eventually([&] { return redis.command({"XLEN", "flashq:out:{restart-1}"}) != std::vector<std::string>{"0"}; },
                         milliseconds(20000)));
  worker.signal(SIGSTOP);
  const std::vector<std::string> state = redis.command({"HGET", "flashq:job:{restart-1}", "state"});
  ASSERT_EQ(state, std::vector<std::string>{"running"}) << "the job finished before the broker was killed";
  ASSERT_NE(redis.command({"HGET", "flashq:job:{restart-1}", "first_assigned_ms"}), std::vector<std::string>{"(nil)"});
  ASSERT_NE(redis.command({"HGET", "flashq:job:{restart-1}", "first_token_ms"}), std::vector<std::string>{"(nil)"});
  cluster_->broker().kill_now();
  std::this_thread::sleep_for(milliseconds(500));
  ASSERT_TRUE(start_broker(redis_flags("a")));
  worker.signal(SIGCONT);  // it finds a broker that does not know it, registers again, runs the rest
  const auto restarted = Clock::now();

  auto client = connect_client();
  protocol::StatusReply status;
  // STATUS is decoded strictly by the client: a refused figure would throw here.
  ASSERT_NO_THROW(status = client->status("restart-1", 20000));
  EXPECT_NE(status.state, protocol::JobState::kFinished) << "the restarted broker holds the job, not yet finished";
  ASSERT_TRUE(wait_finals({"restart-1"}, milliseconds(60000)));
  ASSERT_NO_THROW(status = client->status("restart-1", 20000));
  ASSERT_EQ(status.state, protocol::JobState::kFinished);
  ASSERT_TRUE(status.final_result);
  EXPECT_GE(status.attempt, 2) << "a continuation after the restart";
  const int64_t lived_ms = std::chrono::duration_cast<milliseconds>(restarted - submitted).count();
  expect_consistent(status.final_result->timings, lived_ms, "STATUS");

  // The final event (a REPLAY of the whole stream, decoded strictly) and the stored final agree.
  std::vector<protocol::Event> replayed;
  ASSERT_NO_THROW(client->replay("restart-1", 0, [&](const protocol::Event& e) { replayed.push_back(e); }, 20000));
  ASSERT_FALSE(replayed.empty());
  ASSERT_TRUE(replayed.back().final_result);
  expect_consistent(replayed.back().final_result->timings, lived_ms, "final event");
  EXPECT_TRUE(is_complete_stream(replayed));
  EXPECT_TRUE(matches(read_run(redis, "restart-1"), want)) << "the continuation is the job's own output";
}

// docs/redis.md, "Upgrading: key names": the keys an earlier version wrote (untagged) are renamed
// with the brokers stopped, and a broker of this version goes on with the jobs they hold.
TEST_F(RedisRestartTest, KeysOfAnEarlierVersionAreMigratedAndItsJobsGoOn) {
  RedisClient redis(redis_->port());
  // As an earlier broker `a` left them: a job taken and not finished, and a finished one.
  redis.command({"XGROUP", "CREATE", "flashq:jobs", "flashq", "0", "MKSTREAM"});
  xadd_job(redis, "old-1", "job 1: the queue hums", 12);
  redis.command({"XREADGROUP", "GROUP", "flashq", "a", "COUNT", "1", "STREAMS", "flashq:jobs", ">"});
  const std::string entry = redis.command({"XRANGE", "flashq:jobs", "-", "+"}).at(0);
  redis.command({"HSET", "flashq:job:old-1", "state", "running", "owner", "a", "entry", entry, "stream", "flashq:jobs",
                 "attempt", "1", "deliveries", "1", "next_seq", "0"});
  const std::string final_json =
      R"({"finish_reason":"stop","usage":{"prompt_tokens":3,"completion_tokens":1},)"
      R"("spec_stats":{"draft_steps":0,"accepted_tokens":0,"tau":1},"timings":{"queue_ms":1,"ttft_ms":2,"total_ms":3}})";
  redis.command({"XADD", "flashq:out:old-2", "*", "seq", "0", "final", final_json});
  redis.command({"HSET", "flashq:job:old-2", "state", "finished", "final", final_json, "next_seq", "1"});

  const CommandResult migrated = run_command("/bin/bash scripts/redis-migrate-keys -p " + std::to_string(redis_->port()));
  ASSERT_EQ(migrated.exit_code, 0) << migrated.output;
  EXPECT_NE(migrated.output.find("3 keys renamed"), std::string::npos) << migrated.output;
  EXPECT_EQ(redis.command({"EXISTS", "flashq:job:old-1"}), std::vector<std::string>{"0"});
  const CommandResult again = run_command("/bin/bash scripts/redis-migrate-keys -p " + std::to_string(redis_->port()));
  EXPECT_NE(again.output.find("0 keys renamed"), std::string::npos) << "idempotent: " << again.output;

  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 2);
  ASSERT_TRUE(wait_finals({"old-1"}, milliseconds(30000)));
  EXPECT_TRUE(matches(read_run(redis, "old-1"), reference("job 1: the queue hums", 12)));
  EXPECT_EQ(redis.command({"HGET", "flashq:job:{old-1}", "deliveries"}), std::vector<std::string>{"2"})
      << "the same job, taken again";
  auto client = connect_client();
  const protocol::StatusReply done = client->status("old-2", 20000);
  EXPECT_EQ(done.state, protocol::JobState::kFinished);
  ASSERT_TRUE(done.final_result);
  EXPECT_EQ(done.final_result->timings.total_ms, 3);
}

}  // namespace
}  // namespace flashq::testing
