// The broker's bounded priority queue.
#include <gtest/gtest.h>

#include "broker/job_queue.h"

namespace flashq {
namespace {

TEST(JobQueue, LowerPriorityFirstAndFifoWithinALevel) {
  JobQueue queue({});
  ASSERT_TRUE(queue.push_back("a", 5, 1));
  ASSERT_TRUE(queue.push_back("b", 0, 1));
  ASSERT_TRUE(queue.push_back("c", 5, 1));
  ASSERT_TRUE(queue.push_back("d", 0, 1));
  EXPECT_EQ(queue.pop(), "b");
  EXPECT_EQ(queue.pop(), "d");
  EXPECT_EQ(queue.pop(), "a");
  EXPECT_EQ(queue.pop(), "c");
  EXPECT_EQ(queue.pop(), std::nullopt);
}

TEST(JobQueue, ContinuationsGoToTheFrontOfTheirLevel) {
  JobQueue queue({});
  queue.push_back("a", 1, 1);
  queue.push_front("retry", 1, 1);
  queue.push_back("urgent", 0, 1);
  EXPECT_EQ(queue.pop(), "urgent");
  EXPECT_EQ(queue.pop(), "retry");
  EXPECT_EQ(queue.pop(), "a");
}

TEST(JobQueue, RefusesJobsOverEitherLimitAndRecovers) {
  JobQueue queue({.max_jobs = 2, .max_prompt_tokens = 100});
  EXPECT_TRUE(queue.push_back("a", 0, 60));
  EXPECT_FALSE(queue.push_back("too-many-tokens", 0, 41));
  EXPECT_TRUE(queue.push_back("b", 0, 40));
  EXPECT_FALSE(queue.push_back("too-many-jobs", 0, 0));
  EXPECT_EQ(queue.size(), 2);
  EXPECT_EQ(queue.prompt_tokens(), 100);
  queue.pop();
  EXPECT_TRUE(queue.push_back("c", 0, 10));
}

TEST(JobQueue, RemovesAQueuedJobAndItsTokens) {
  JobQueue queue({});
  queue.push_back("a", 0, 7);
  queue.push_back("b", 3, 5);
  EXPECT_TRUE(queue.remove("b"));
  EXPECT_FALSE(queue.remove("b"));
  EXPECT_EQ(queue.size(), 1);
  EXPECT_EQ(queue.prompt_tokens(), 7);
  EXPECT_EQ(queue.size_at(3), 0);
  EXPECT_EQ(queue.pop(), "a");
  EXPECT_TRUE(queue.empty());
}

// A chat's estimate counts everything its template writes: text, reasoning, tool call arguments
// and tool definitions.
TEST(JobQueue, ChatEstimateCountsToolsReasoningAndArguments) {
  protocol::Job job;
  job.prompt = std::vector<protocol::ChatMessage>{{"user", std::string(400, 'u')}};
  EXPECT_EQ(estimate_prompt_tokens(job), 101);
  protocol::ChatMessage call{.role = "assistant", .content = std::nullopt};
  call.reasoning_content = std::string(400, 'r');
  call.tool_calls = {{"c", "f", std::string(400, 'a')}};
  job.prompt = std::vector<protocol::ChatMessage>{{"user", std::string(400, 'u')}, call};
  job.tools = std::string(400, 't');
  EXPECT_EQ(estimate_prompt_tokens(job), 401);
}

}  // namespace
}  // namespace flashq
