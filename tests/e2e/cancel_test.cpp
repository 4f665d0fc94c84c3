// End to end: cancels (queued and mid-stream), deadlines (queued and running) and admission
// control (REJECTED overloaded, then recovery once workers drain the queue).
#include <gtest/gtest.h>

#include "tests/e2e/e2e_fixture.h"

namespace flashq::testing {
namespace {

std::vector<int32_t> prefix(const std::vector<int32_t>& tokens, size_t n) {
  return {tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(std::min(n, tokens.size()))};
}

TEST_F(E2eTest, CancelAndDeadlineEndToEnd) {
  const std::string long_text = long_prompt();
  ASSERT_FALSE(long_text.empty()) << "no prompt among the candidates runs long";
  // Runs well past a cancel or a deadline: the tiny model decodes some 20,000 tokens a second on
  // two cores, so its 3,000 tokens take about 150 ms (and seconds under the sanitizers).
  constexpr int64_t kLongJob = 3000;

  ASSERT_TRUE(start_broker());
  auto client = connect_client();
  auto canceller = connect_client();

  // No worker yet: the cancelled job never runs; its only event is the final one.
  ASSERT_NO_THROW(client->submit(make_job("cancel-queued", "hello world", 16), 20000));
  EXPECT_EQ(client->status("cancel-queued").state, protocol::JobState::kQueued);
  const protocol::StatusReply after_cancel = canceller->cancel("cancel-queued", 20000);
  EXPECT_EQ(after_cancel.state, protocol::JobState::kFinished);
  const JobRun cancelled_queued = wait_job(*client, "cancel-queued", 20000);
  ASSERT_TRUE(cancelled_queued.final_result) << cancelled_queued;
  EXPECT_EQ(cancelled_queued.finish_reason(), "cancelled");
  EXPECT_TRUE(is_complete_stream(cancelled_queued.events)) << cancelled_queued;
  EXPECT_EQ(cancelled_queued.events.size(), 1u);
  EXPECT_EQ(client->status("cancel-queued").attempt, 0) << "a cancelled queued job was assigned";

  // No worker: a short deadline passes in the queue.
  protocol::Job short_deadline = make_job("deadline-queued", "hello world", 16);
  short_deadline.deadline_ms = 300;
  const JobRun expired_queued = run_job(*client, short_deadline, 20000);
  ASSERT_TRUE(expired_queued.final_result) << expired_queued;
  EXPECT_EQ(expired_queued.finish_reason(), "deadline");
  EXPECT_TRUE(is_complete_stream(expired_queued.events)) << expired_queued;

  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));

  // Mid-stream: cancelled (from another producer) once its first tokens arrived.
  const Reference long_reference = reference(long_text, 400);
  ASSERT_NO_THROW(client->submit(make_job("cancel-running", long_text, kLongJob), 20000));
  bool sent_cancel = false;
  const JobRun cancelled_running = wait_job(*client, "cancel-running", 60000, [&](const protocol::Event& e) {
    if (!sent_cancel && !e.token_ids.empty()) {
      sent_cancel = true;
      EXPECT_NO_THROW(canceller->cancel("cancel-running", 20000));
    }
  });
  ASSERT_TRUE(sent_cancel) << cancelled_running;
  ASSERT_TRUE(cancelled_running.final_result) << cancelled_running;
  EXPECT_EQ(cancelled_running.finish_reason(), "cancelled");
  EXPECT_TRUE(is_complete_stream(cancelled_running.events)) << cancelled_running;
  EXPECT_LT(cancelled_running.ids().size(), static_cast<size_t>(kLongJob));
  EXPECT_EQ(prefix(cancelled_running.ids(), long_reference.tokens.size()),
            prefix(long_reference.tokens, cancelled_running.ids().size()))
      << "the tokens before the cancel are not the greedy output";

  // Running: its deadline passes while it decodes (a third of the way through, at full speed).
  protocol::Job running_deadline = make_job("deadline-running", long_text, kLongJob);
  running_deadline.deadline_ms = 50;
  const JobRun expired_running = run_job(*client, running_deadline, 60000);
  ASSERT_TRUE(expired_running.final_result) << expired_running;
  EXPECT_EQ(expired_running.finish_reason(), "deadline");
  EXPECT_TRUE(is_complete_stream(expired_running.events)) << expired_running;
  EXPECT_LT(expired_running.ids().size(), static_cast<size_t>(kLongJob));

  // The worker is free again: a normal job runs to the end.
  expect_matches(run_job(*client, make_job("after-cancels", "hello world", 16)), reference("hello world", 16));
}

TEST_F(E2eTest, OverloadRejectsThenRecovers) {
  ASSERT_TRUE(start_broker({"--max-queued-jobs", "2"}));
  auto client = connect_client();
  ASSERT_NO_THROW(client->submit(make_job("queued-1", "hello world", 16), 20000));
  ASSERT_NO_THROW(client->submit(make_job("queued-2", "def main():", 16), 20000));
  try {
    client->submit(make_job("one-too-many", "In the beginning", 16), 20000);
    ADD_FAILURE() << "a third job was accepted into a queue bounded at 2";
  } catch (const JobRejected& e) {
    EXPECT_EQ(e.reason(), "overloaded");
    EXPECT_GT(e.retry_after_ms(), 0);
  } catch (const Error& e) {
    ADD_FAILURE() << "not a REJECTED: " << e.what();
  }
  // A rejected job has no state and no stream.
  EXPECT_EQ(client->status("one-too-many").state, protocol::JobState::kUnknown);

  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  expect_matches(wait_job(*client, "queued-1"), reference("hello world", 16));
  expect_matches(wait_job(*client, "queued-2"), reference("def main():", 16));
  // Drained: the same job is taken now and runs.
  expect_matches(run_job(*client, make_job("one-too-many", "In the beginning", 16)), reference("In the beginning", 16));
  EXPECT_EQ(cluster_->metric("flashq_jobs_rejected_total"), std::optional<double>(1));
}

}  // namespace
}  // namespace flashq::testing
