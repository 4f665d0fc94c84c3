// The Redis store keeps the log and reports what happened; the broker decides. Against a real
// redis-server, with no broker: the store's replies come back from collect() as outcomes, and what
// it reads is bounded by what the broker tells it of its room (StoreTurn).
#include "broker/redis/redis_job_store.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <thread>
#include <variant>

#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

namespace flashq {
namespace {

using testing::RedisServer;
using namespace std::chrono_literals;

BrokerOptions options_for(const RedisServer& server) {
  BrokerOptions options;
  options.redis.url = server.url();
  options.redis.consumer = "store-test";
  return options;
}

StoreTurn with_room(int64_t free_slots) { return StoreTurn{.workers = 1, .free_slots = free_slots, .models = {"m"}}; }

// Runs the store's turns (as the broker's loop would, applying nothing) until an outcome of type
// T comes back, or `timeout` passes; every outcome seen goes to `seen`.
template <typename T>
std::optional<T> turn_until(RedisJobStore& store, const StoreTurn& turn, StoreOutcomes& seen,
                            std::chrono::milliseconds timeout = 5000ms) {
  const auto give_up = SteadyClock::now() + timeout;
  while (SteadyClock::now() < give_up) {
    for (StoreOutcome& outcome : store.collect()) seen.push_back(std::move(outcome));
    for (const StoreOutcome& outcome : seen) {
      if (const T* found = std::get_if<T>(&outcome)) return *found;
    }
    store.turn(turn);
    std::this_thread::sleep_for(2ms);
  }
  return std::nullopt;
}

// A real redis-server and a store connected to it and set up (its models announced).
class RedisJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.start());
    store_ = std::make_unique<RedisJobStore>(options_for(server), "tcp://127.0.0.1:0");
    ASSERT_TRUE(turn_until<ModelsServed>(*store_, StoreTurn{}, seen)) << "connected and set up";
  }

  RedisJobStore& store() { return *store_; }

  testing::TempDir dir;
  RedisServer server{dir.path() / "redis"};
  StoreOutcomes seen;

 private:
  std::unique_ptr<RedisJobStore> store_;
};

TEST_F(RedisJobStoreTest, ASubmitIsAnsweredOnceRedisHasTheEntry) {
  EXPECT_FALSE(store().submit("producer", protocol::Job{.id = "j1", .prompt = "hi"}).has_value())
      << "answered with the reply";
  seen.clear();
  const auto first = turn_until<IntakeAnswer>(store(), StoreTurn{}, seen);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->kind, IntakeAnswer::Kind::kStored);
  EXPECT_TRUE(first->first_time);
  EXPECT_EQ(first->producer, "producer");
  EXPECT_EQ(first->job.id, "j1");

  EXPECT_FALSE(store().submit("producer", protocol::Job{.id = "j1", .prompt = "hi"}).has_value());
  seen.clear();
  const auto again = turn_until<IntakeAnswer>(store(), StoreTurn{}, seen);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, IntakeAnswer::Kind::kStored);
  EXPECT_FALSE(again->first_time) << "a resubmission of a live id is not a new job";
}

TEST_F(RedisJobStoreTest, EntriesAreTakenOnlyWhenTheBrokerHasRoom) {
  store().submit("producer", protocol::Job{.id = "j1", .prompt = "hello"});
  ASSERT_TRUE(turn_until<IntakeAnswer>(store(), StoreTurn{}, seen));

  seen.clear();
  EXPECT_FALSE(turn_until<TakenJob>(store(), StoreTurn{}, seen, 300ms)) << "no workers: no room";
  const auto taken = turn_until<TakenJob>(store(), with_room(1), seen);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->job.id, "j1");
  EXPECT_EQ(taken->job.prompt, protocol::Prompt{std::string("hello")});
  EXPECT_FALSE(taken->entry.empty());
  EXPECT_EQ(taken->attempt, 0);
  EXPECT_EQ(taken->next_seq, 0);
  EXPECT_LE(taken->submitted_at, SteadyClock::now());
  EXPECT_GT(taken->deadline_at, SteadyClock::now());
}

TEST_F(RedisJobStoreTest, EventsComeBackOnceStoredAndTheFinalAcknowledgesTheEntry) {
  store().submit("producer", protocol::Job{.id = "j1", .prompt = "hi"});
  ASSERT_TRUE(turn_until<TakenJob>(store(), with_room(1), seen));
  store().job_started("j1", 1);

  EXPECT_FALSE(store().keep_event(protocol::Event{.id = "j1", .seq = 0, .token_ids = {7}, .text = "a"}, "").has_value())
      << "kept only once Redis has it";
  seen.clear();
  const auto kept = turn_until<EventsKept>(store(), with_room(0), seen);
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->events.size(), 1u);
  EXPECT_EQ(kept->events[0].seq, 0);

  protocol::FinalResult result;
  result.finish_reason = protocol::FinishReason::kStop;
  store().keep_event(protocol::Event{.id = "j1", .seq = 1, .final_result = result}, "");
  seen.clear();
  const auto final_kept = turn_until<EventsKept>(store(), with_room(0), seen);
  ASSERT_TRUE(final_kept);
  ASSERT_EQ(final_kept->events.size(), 1u);
  EXPECT_TRUE(final_kept->events[0].final_result.has_value());
  testing::RedisClient plain(server.port());
  EXPECT_EQ(plain.command({"XPENDING", "flashq:jobs", "flashq"}).front(), "0") << "the entry is acknowledged";
  const auto status = store().status("j1");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, protocol::JobState::kFinished);
}

TEST_F(RedisJobStoreTest, LogprobsAndTheStructuredOutputAreKeptAndReplayed) {
  const protocol::Job job{.id = "j1", .prompt = "hi", .structured_output = R"({"type": "json_object"})", .logprobs = 2};
  store().submit("producer", job);
  const auto taken = turn_until<TakenJob>(store(), with_room(1), seen);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->job.structured_output, job.structured_output) << "the worker gets the grammar";
  EXPECT_EQ(taken->job.logprobs, 2);
  store().job_started("j1", 1);

  const std::vector<protocol::OutputLogprobs> logprobs = {
      {{7, -0.5, std::string("\xe2\x80", 2)}, {{7, -0.5, std::string("\xe2\x80", 2)}, {3, -1.0, "{"}}}};
  store().keep_event(protocol::Event{.id = "j1", .seq = 0, .token_ids = {7}, .text = "", .logprobs = logprobs}, "");
  store().keep_event(protocol::Event{.id = "j1", .seq = 1, .token_ids = {3}, .text = "{"}, "");
  seen.clear();
  ASSERT_TRUE(turn_until<EventsKept>(store(), with_room(0), seen));
  const StoredReplay replay = store().replay(protocol::Replay{.id = "j1", .from_seq = 0});
  ASSERT_TRUE(replay.answered);
  ASSERT_EQ(replay.events.size(), 2u);
  EXPECT_EQ(replay.events[0].logprobs, logprobs);
  EXPECT_TRUE(replay.events[1].logprobs.empty()) << "an event without them stores none";
}

}  // namespace
}  // namespace flashq
