// Cache-aware routing on its own (cache_aware_dispatcher.h): a session's jobs go back to the
// worker that served it, a prompt to the worker last sent its longest known prefix, both only
// while that worker has a free slot and is not too far above the least-loaded one; what is
// remembered is bounded and forgotten with the worker. Also the prompt prefix keys it matches on.
#include <gtest/gtest.h>

#include <algorithm>

#include "broker/cache_aware_dispatcher.h"
#include "broker/prompt_prefix.h"

namespace flashq {
namespace {

// A prompt of whole 256-byte blocks and more: what an agent sends again and again.
const std::string kSystemPrompt = std::string(1024, 'S') + " tools: search, fetch, run.";

class CacheAwareDispatcherFixture : public ::testing::Test {
 protected:
  void add_worker(const std::string& identity, int64_t slots, const std::string& model = "m") {
    workers_.add(identity, protocol::Ready{.worker_id = identity, .model = model, .slots = slots}, SteadyClock::now());
  }
  void queue_job(const std::string& id, std::optional<std::string> session, std::string prompt = "hi",
                 std::optional<std::string> model = std::nullopt) {
    JobRecord record;
    record.job.id = id;
    record.job.session = std::move(session);
    record.job.prompt = std::move(prompt);
    record.job.model = std::move(model);
    jobs_.jobs.emplace(id, std::move(record));
    ASSERT_TRUE(queue_.push_back(id, 0, 1));
  }
  // The next assignment as "job@worker:reason", taking the slot as the broker does; "" when none.
  std::string next() {
    std::optional<Assignment> assignment = dispatcher_->next(queue_, workers_, jobs_);
    if (!assignment) return "";
    assignment->worker->jobs.insert(assignment->job_id);
    return assignment->job_id + "@" + assignment->worker->identity + ":" +
           std::string(routing_reason_name(assignment->reason));
  }
  void end(const std::string& worker, const std::string& job) { workers_.find(worker)->jobs.erase(job); }

  JobQueue queue_{QueueLimits{}};
  WorkerRegistry workers_;
  JobTable jobs_;
  std::unique_ptr<CacheAwareDispatcher> dispatcher_ = std::make_unique<CacheAwareDispatcher>(RoutingOptions{});
};

TEST_F(CacheAwareDispatcherFixture, ASessionsTurnsGoToTheWorkerThatServedIt) {
  add_worker("a", 4);
  add_worker("b", 4);
  queue_job("t1", "chat-1");
  EXPECT_EQ(next(), "t1@a:least_loaded") << "nothing known yet; a tie goes to the first identity";
  end("a", "t1");
  queue_job("other", std::nullopt);
  EXPECT_EQ(next(), "other@a:least_loaded");
  // a holds 1 of 4, b none: by load alone t2 would go to b.
  queue_job("t2", "chat-1");
  EXPECT_EQ(next(), "t2@a:session");
  queue_job("fresh", "chat-2");
  EXPECT_EQ(next(), "fresh@b:least_loaded") << "a session never seen goes by load";
}

TEST_F(CacheAwareDispatcherFixture, AHotSessionSpillsOntoOtherWorkersBeyondTheLoadGap) {
  add_worker("a", 4);
  add_worker("b", 4);
  queue_job("h1", "hot");
  queue_job("h2", "hot");
  queue_job("h3", "hot");
  queue_job("h4", "hot");
  queue_job("h5", "hot");
  EXPECT_EQ(next(), "h1@a:least_loaded");
  EXPECT_EQ(next(), "h2@a:session");   // a 1/4 against b 0/4: 0.25 apart
  EXPECT_EQ(next(), "h3@a:session");   // 2/4 against 0/4: 0.5 apart, the bound
  EXPECT_EQ(next(), "h4@b:fallback");  // 3/4 against 0/4: too far; b takes it
  // b served the session last: its caches hold the longest prefix of the next turn.
  EXPECT_EQ(next(), "h5@b:session");
}

TEST_F(CacheAwareDispatcherFixture, AFullSessionWorkerIsNeverWaitedFor) {
  add_worker("a", 1);
  add_worker("b", 1);
  queue_job("t1", "chat");
  EXPECT_EQ(next(), "t1@a:least_loaded");
  queue_job("t2", "chat");
  EXPECT_EQ(next(), "t2@b:fallback") << "a has no free slot";
  queue_job("t3", "chat");
  EXPECT_EQ(next(), "") << "no free slot anywhere: the job waits";
  end("a", "t1");
  EXPECT_EQ(next(), "t3@a:fallback") << "b (the session's last worker) is full, a is free";
}

TEST_F(CacheAwareDispatcherFixture, APromptGoesWhereItsPrefixWasSent) {
  add_worker("a", 4);
  add_worker("b", 4);
  queue_job("unrelated", std::nullopt, std::string(600, 'u'));
  EXPECT_EQ(next(), "unrelated@a:least_loaded");
  queue_job("q1", std::nullopt, kSystemPrompt + " user: first question");
  EXPECT_EQ(next(), "q1@b:least_loaded");
  // a and b both hold one job: by load alone (a tie) q2 would go to a.
  queue_job("q2", std::nullopt, kSystemPrompt + " user: another question");
  EXPECT_EQ(next(), "q2@b:prefix");
  // Shorter than a block: nothing to match, so load decides.
  queue_job("short", std::nullopt, "S");
  EXPECT_EQ(next(), "short@a:least_loaded");
}

TEST_F(CacheAwareDispatcherFixture, TheLongestKnownPrefixWins) {
  add_worker("a", 4);
  add_worker("b", 4);
  const std::string conversation = kSystemPrompt + std::string(1024, 'T');  // 8 blocks
  queue_job("long", std::nullopt, conversation);
  EXPECT_EQ(next(), "long@a:least_loaded");
  // a too busy for the gap: the system prompt alone goes to b, whose blocks 1..4 now say b.
  workers_.find("a")->jobs.insert({"busy-1", "busy-2"});
  queue_job("short", std::nullopt, kSystemPrompt + " user: hi");
  EXPECT_EQ(next(), "short@b:fallback");
  end("a", "busy-1");
  end("a", "busy-2");
  end("b", "short");
  // b is idle and holds the first 4 blocks; a (1 of 4 busy) holds all 8.
  queue_job("longer", std::nullopt, conversation + " user: and then?");
  EXPECT_EQ(next(), "longer@a:prefix");
}

TEST_F(CacheAwareDispatcherFixture, AWorkerThatLeavesTakesItsSessionsAndPrefixesWithIt) {
  add_worker("a", 4);
  add_worker("b", 4);
  queue_job("t1", "chat", kSystemPrompt);
  EXPECT_EQ(next(), "t1@a:least_loaded");
  EXPECT_EQ(dispatcher_->sessions_known(), 1u);
  EXPECT_GT(dispatcher_->prefix_blocks_known(), 0u);
  workers_.remove("a");
  dispatcher_->worker_left("a");
  EXPECT_EQ(dispatcher_->sessions_known(), 0u);
  EXPECT_EQ(dispatcher_->prefix_blocks_known(), 0u);
  add_worker("a", 4);  // the same identity, restarted: its caches are empty
  add_worker("c", 4);
  queue_job("t2", "chat", kSystemPrompt);
  EXPECT_EQ(next(), "t2@a:least_loaded");
}

TEST_F(CacheAwareDispatcherFixture, AWorkerOfAnotherModelIsNoPreference) {
  add_worker("a", 4, "small");
  add_worker("b", 4, "big");
  queue_job("t1", "chat", "hi", "small");
  EXPECT_EQ(next(), "t1@a:least_loaded");
  queue_job("t2", "chat", "hi", "big");
  EXPECT_EQ(next(), "t2@b:least_loaded") << "the session's worker does not serve the model";
}

TEST_F(CacheAwareDispatcherFixture, RoutingMemoryIsBoundedLeastRecentlyUsedFirst) {
  dispatcher_ = std::make_unique<CacheAwareDispatcher>(
      RoutingOptions{.max_sessions = 2, .max_prefix_blocks = 3, .prefix_blocks_per_job = 2});
  add_worker("a", 16);
  add_worker("b", 16);
  queue_job("s1", "one");
  queue_job("s2", "two");
  EXPECT_EQ(next(), "s1@a:least_loaded");
  EXPECT_EQ(next(), "s2@b:least_loaded");
  queue_job("s1-again", "one");  // "one" becomes the most recently used
  EXPECT_EQ(next(), "s1-again@a:session");
  queue_job("s3", "three");  // evicts "two"
  EXPECT_EQ(next(), "s3@b:least_loaded");
  EXPECT_EQ(dispatcher_->sessions_known(), 2u);
  queue_job("s2-again", "two");
  EXPECT_EQ(next(), "s2-again@a:least_loaded") << "forgotten: load decides (a 2/16 against b 2/16)";
  queue_job("long", std::nullopt, kSystemPrompt);
  EXPECT_EQ(next(), "long@b:least_loaded");
  EXPECT_EQ(dispatcher_->prefix_blocks_known(), 2u) << "two blocks a job";
  queue_job("long-2", std::nullopt, std::string(1024, 'Z'));
  EXPECT_EQ(next(), "long-2@a:least_loaded");
  EXPECT_EQ(dispatcher_->prefix_blocks_known(), 3u) << "at most 3 blocks";
  EXPECT_EQ(dispatcher_->sessions_known(), 2u);
}

protocol::Job chat_job(std::vector<protocol::ChatMessage> messages) {
  protocol::Job job;
  job.prompt = std::move(messages);
  job.tools = R"([{"type":"function","function":{"name":"search"}}])";
  return job;
}

TEST(PromptPrefixKeys, AChatsNextTurnRepeatsTheKeysOfTheTurnBefore) {
  std::vector<protocol::ChatMessage> turn = {{.role = "system", .content = kSystemPrompt},
                                             {.role = "user", .content = "find the bug"}};
  const std::vector<std::uint64_t> first = prompt_prefix_keys(chat_job(turn), 1024);
  ASSERT_EQ(first.size(), 4u) << "the system prompt alone fills 4 blocks";
  turn.push_back({.role = "assistant", .content = std::nullopt,
                  .tool_calls = {{.id = "c1", .name = "search", .arguments_json = R"({"q":"bug"})"}}});
  turn.push_back({.role = "tool", .content = std::string(600, 'r'), .tool_call_id = "c1"});
  const std::vector<std::uint64_t> second = prompt_prefix_keys(chat_job(turn), 1024);
  ASSERT_GT(second.size(), first.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), second.begin()));
  // Other tools change the system turn a template renders: nothing in common.
  protocol::Job other_tools = chat_job(turn);
  other_tools.tools = "[]";
  EXPECT_NE(prompt_prefix_keys(other_tools, 1024).front(), second.front());
  EXPECT_EQ(prompt_prefix_keys(chat_job(turn), 2).size(), 2u) << "at most max_blocks keys";
}

TEST(PromptPrefixKeys, BlocksAreWholeAndKeyedByEverythingBefore) {
  protocol::Job text;
  text.prompt = std::string(511, 'x');
  EXPECT_EQ(prompt_prefix_keys(text, 1024).size(), 1u) << "a tail shorter than a block has no key";
  text.prompt = std::string(512, 'x');
  const std::vector<std::uint64_t> two = prompt_prefix_keys(text, 1024);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NE(two[0], two[1]) << "equal blocks at different depths differ";
  text.prompt = "y" + std::string(511, 'x');
  const std::vector<std::uint64_t> changed = prompt_prefix_keys(text, 1024);
  EXPECT_NE(changed[0], two[0]);
  EXPECT_NE(changed[1], two[1]) << "a change in block 0 changes every later key";
  // The same bytes as token ids (4 bytes each) are another prompt.
  protocol::Job tokens;
  tokens.prompt = protocol::TokenIds(128, 0x78787878);
  const std::vector<std::uint64_t> token_keys = prompt_prefix_keys(tokens, 1024);
  ASSERT_EQ(token_keys.size(), 2u) << "64 tokens a block";
  EXPECT_NE(token_keys[0], two[0]);
}

}  // namespace
}  // namespace flashq
