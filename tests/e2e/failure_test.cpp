// End to end under process failures: workers and the broker killed with SIGKILL mid-flight.
// Nothing is lost: every job ends once, with the output the engine produces in one process, in
// one gap-free stream (docs/protocol.md §9.5).
#include <gtest/gtest.h>

#include "tests/e2e/e2e_fixture.h"

namespace flashq::testing {
namespace {

class WorkerLossTest : public E2eTest {
 protected:
  // 40 jobs over two workers; worker "a" is killed as soon as the first tokens stream. With
  // `replace`, a new worker joins after the kill; without, the survivor runs everything.
  void kill_a_worker_mid_stream(bool replace) {
    ASSERT_TRUE(start_broker());
    start_worker("a", 3);
    start_worker("b", 3);
    ASSERT_TRUE(cluster_->wait_for_workers(2));
    auto client = connect_client();
    StreamCollector collector(cluster_->stream());
    ASSERT_TRUE(wait_subscribed(collector, *client));

    constexpr int kJobs = 40;
    constexpr int64_t kMaxTokens = 40;
    std::vector<std::string> prompts;
    for (int i = 0; i < kJobs; ++i) prompts.push_back("Job " + std::to_string(i) + " asks the queue about workers");
    const std::vector<Reference> want = references(prompts, kMaxTokens);
    auto id = [](int i) { return "loss-" + std::to_string(i); };

    for (int i = 0; i < kJobs; ++i) ASSERT_NO_THROW(client->submit(make_job(id(i), prompts[i], kMaxTokens), 20000));
    const auto until = Clock::now() + milliseconds(60000);
    std::optional<int> killed_status;
    std::vector<JobRun> runs;
    runs.push_back(wait_job(*client, id(0), ms_until(until), [&](const protocol::Event& e) {
      if (!killed_status && !e.token_ids.empty()) killed_status = cluster_->worker("a").kill_now();
    }));
    ASSERT_TRUE(killed_status) << "job " << id(0) << " streamed no tokens";
    EXPECT_EQ(killed_status, std::optional<int>(128 + SIGKILL));
    if (replace) start_worker("c", 3);
    for (int i = 1; i < kJobs; ++i) runs.push_back(wait_job(*client, id(i), ms_until(until)));

    for (int i = 0; i < kJobs; ++i) expect_matches(runs[i], want[i], &collector);
    EXPECT_TRUE(collector.has_no_problems());
    // The kill must have hit running jobs, or this test showed nothing.
    EXPECT_GT(cluster_->metric("flashq_job_retries_total").value_or(0), 0) << "no job was re-queued";
    EXPECT_TRUE(cluster_->worker("b").running());
    EXPECT_TRUE(cluster_->wait_for_workers(replace ? 2 : 1));
  }
};

TEST_F(WorkerLossTest, KillingAWorkerMidStreamLosesNothing) { kill_a_worker_mid_stream(false); }

TEST_F(WorkerLossTest, KillingAWorkerMidStreamAndStartingAnotherLosesNothing) { kill_a_worker_mid_stream(true); }

// A worker stopped (SIGTERM) whose drain timeout passes mid-job hands the job back: it finishes on
// the other worker, continued from what was streamed, as if nothing had happened.
TEST_F(E2eTest, WorkerShutDownMidJobHandsItToAnother) {
  ASSERT_TRUE(start_broker());
  start_worker("a", 1, {"--drain-timeout-ms", "50"});
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  constexpr int64_t kTokens = 3000;  // still running when the drain timeout passes
  const std::string prompt = long_prompt(kTokens);
  ASSERT_FALSE(prompt.empty());
  const Reference want = reference(prompt, kTokens);
  auto client = connect_client();
  bool stopped = false;
  ASSERT_NO_THROW(client->submit(make_job("handed-back", prompt, kTokens), 20000));
  const JobRun run = wait_job(*client, "handed-back", 60000, [&](const protocol::Event& e) {
    if (stopped || e.token_ids.empty()) return;
    stopped = true;
    cluster_->worker("a").signal(SIGTERM);
    start_worker("b", 1);
  });
  ASSERT_TRUE(stopped);
  EXPECT_EQ(cluster_->worker("a").wait_exit(milliseconds(10000)), std::optional<int>(0));
  expect_matches(run, want);
  EXPECT_GT(cluster_->metric("flashq_job_retries_total").value_or(0), 0) << "the job was not handed back";
}

// A worker frozen (SIGSTOP) mid-stream keeps its connection but stops beating: the broker counts it
// lost and re-queues its jobs. Thawed, it still sends the output of the attempts it held; the
// broker ignores it (stale), and the worker registers again.
TEST_F(E2eTest, FrozenWorkerIsReplacedAndItsLateOutputIgnored) {
  ASSERT_TRUE(start_broker());
  start_worker("a", 3);
  start_worker("b", 3);
  ASSERT_TRUE(cluster_->wait_for_workers(2));
  auto client = connect_client();
  StreamCollector collector(cluster_->stream());
  ASSERT_TRUE(wait_subscribed(collector, *client));

  constexpr int kJobs = 20;
  constexpr int64_t kMaxTokens = 40;
  std::vector<std::string> prompts;
  for (int i = 0; i < kJobs; ++i) prompts.push_back("Frozen worker, job " + std::to_string(i));
  const std::vector<Reference> want = references(prompts, kMaxTokens);
  auto id = [](int i) { return "frozen-" + std::to_string(i); };

  for (int i = 0; i < kJobs; ++i) ASSERT_NO_THROW(client->submit(make_job(id(i), prompts[i], kMaxTokens), 20000));
  const auto until = Clock::now() + milliseconds(60000);
  bool frozen = false;
  std::vector<JobRun> runs;
  runs.push_back(wait_job(*client, id(0), ms_until(until), [&](const protocol::Event& e) {
    if (!frozen && !e.token_ids.empty()) {
      cluster_->worker("a").signal(SIGSTOP);
      frozen = true;
    }
  }));
  ASSERT_TRUE(frozen);
  EXPECT_TRUE(
      eventually([&] { return cluster_->metric("flashq_job_retries_total").value_or(0) > 0; }, milliseconds(20000)))
      << "the frozen worker's jobs were not re-queued";
  cluster_->worker("a").signal(SIGCONT);
  for (int i = 1; i < kJobs; ++i) runs.push_back(wait_job(*client, id(i), ms_until(until)));

  for (int i = 0; i < kJobs; ++i) expect_matches(runs[i], want[i], &collector);
  EXPECT_TRUE(collector.has_no_problems());
  EXPECT_TRUE(cluster_->worker("a").running());
  EXPECT_TRUE(cluster_->wait_for_workers(2)) << "the thawed worker did not register again";
}

TEST_F(E2eTest, WorkerRestartReRegisters) {
  ASSERT_TRUE(start_broker());
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  auto client = connect_client();
  expect_matches(run_job(*client, make_job("before-restart", "hello world", 16)), reference("hello world", 16));

  EXPECT_EQ(cluster_->worker("w1").kill_now(), std::optional<int>(128 + SIGKILL));
  ASSERT_TRUE(cluster_->wait_for_workers(0)) << "the broker still counts the dead worker";
  EXPECT_EQ(http_get(cluster_->http_port(), "/readyz").status, 503);

  // Queued while no worker is there; runs once the restarted worker registers.
  ASSERT_NO_THROW(client->submit(make_job("during-restart", "Tell me about brokers", 24), 20000));
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  EXPECT_EQ(http_get(cluster_->http_port(), "/readyz").status, 200);
  expect_matches(wait_job(*client, "during-restart"), reference("Tell me about brokers", 24));
  expect_matches(run_job(*client, make_job("after-restart", "def main():", 24)), reference("def main():", 24));
}

TEST_F(E2eTest, BrokerRestartMakesWorkersReRegister) {
  ASSERT_TRUE(start_broker());
  ChildProcess& worker = start_worker("w1", 2);
  ASSERT_TRUE(
      eventually([&] { return http_get(cluster_->http_port(), "/readyz").status == 200; }, milliseconds(20000)));
  {
    auto client = connect_client();
    expect_matches(run_job(*client, make_job("old-broker", "hello world", 16)), reference("hello world", 16));
  }

  EXPECT_EQ(cluster_->broker().kill_now(), std::optional<int>(128 + SIGKILL));
  ASSERT_TRUE(start_broker()) << "the broker did not come back on the same ports";
  ASSERT_TRUE(eventually([&] { return http_get(cluster_->http_port(), "/readyz").status == 200; }, milliseconds(20000)))
      << "the worker did not register with the new broker";
  EXPECT_TRUE(worker.running());

  auto client = connect_client();
  expect_matches(run_job(*client, make_job("new-broker", "In the beginning", 24)), reference("In the beginning", 24));
}

}  // namespace
}  // namespace flashq::testing
