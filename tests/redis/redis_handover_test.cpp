// The session handover of docs/redis.md against a real redis-server, one script call at a time:
// a take of a job whose session another live broker owns moves its entry to that broker's stream
// in one step, a job is handed at most once, an owner that is not alive loses the session, and a
// handed entry whose broker died is claimed from its stream and finished there.
#include <gtest/gtest.h>

#include <memory>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_schema.h"
#include "broker/redis/redis_url.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

namespace flashq {
namespace {

namespace schema = redis_schema;
using testing::RedisClient;
using testing::RedisServer;

class RedisHandoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    plain_ = std::make_unique<RedisClient>(server_.port());
    ASSERT_TRUE(connection_.ensure_connected()) << connection_.last_error();
    ASSERT_FALSE(connection_.command(schema::create_group()).is_error());
    for (const char* broker : {"a", "b"}) {
      ASSERT_FALSE(connection_.command(schema::create_handover_group(broker)).is_error());
      ASSERT_FALSE(connection_.command(schema::register_broker(broker)).is_error());
    }
  }

  // The entries `consumer` reads now: new ones of flashq:jobs and those handed to it after
  // `handed_after`.
  std::vector<std::pair<std::string, schema::Entry>> read(const std::string& consumer,
                                                          const std::string& handed_after = "0") {
    std::vector<std::pair<std::string, schema::Entry>> out;
    const RedisReply reply = connection_.command(schema::read_new(consumer, 10, handed_after, {}));
    EXPECT_FALSE(reply.is_error()) << reply.text;
    for (auto& [stream, entries] : schema::streams_of(reply)) {
      for (schema::Entry& entry : entries) out.emplace_back(stream, std::move(entry));
    }
    return out;
  }

  schema::Take take(const std::string& stream, const std::string& consumer, const std::string& entry,
                    const std::string& job_id, const std::string& session) {
    return schema::take_of(connection_.command(schema::take(stream, consumer, job_id, entry, {.session = session, .session_ttl_ms = 60000})));
  }

  std::string get(const std::vector<std::string>& command) {
    const std::vector<std::string> reply = plain_->command(command);
    return reply.empty() ? "" : reply[0];
  }

  testing::TempDir dir_;
  RedisServer server_{dir_.path() / "redis"};
  RedisConnection connection_{parse_redis_url(server_.url())};
  std::unique_ptr<RedisClient> plain_;  // a client of its own, as an operator's redis-cli
};

TEST_F(RedisHandoverTest, ATurnOfASessionOwnedByALiveBrokerMovesToItsStreamOnce) {
  connection_.command(schema::alive("a", 60000));
  plain_->command({"SET", "flashq:session:conv", "a"});
  plain_->command({"XADD", "flashq:jobs", "*", "id", "t2", "prompt", "hi", "max_tokens", "4", "session", "conv"});

  const auto taken_by_b = read("b");
  ASSERT_EQ(taken_by_b.size(), 1u);
  ASSERT_EQ(taken_by_b[0].first, schema::kJobs);
  const schema::Take handed = take(schema::kJobs, "b", taken_by_b[0].second.id, "t2", "conv");
  EXPECT_EQ(handed.outcome, schema::Take::Outcome::kHanded);
  EXPECT_EQ(handed.moved_to, "a");
  EXPECT_EQ(get({"XLEN", "flashq:jobs"}), "0") << "acknowledged and deleted where it was taken";
  EXPECT_EQ(get({"XPENDING", "flashq:jobs", "flashq"}), "0");
  EXPECT_EQ(get({"XPENDING", "flashq:jobs:a", "flashq"}), "1") << "pending for its new broker at once";
  EXPECT_EQ(get({"HGET", "flashq:job:{t2}", "deliveries"}), "(nil)") << "a handover is not a delivery";

  const auto taken_by_a = read("a");
  ASSERT_EQ(taken_by_a.size(), 1u);
  EXPECT_EQ(taken_by_a[0].first, "flashq:jobs:a");
  const schema::Entry& moved = taken_by_a[0].second;
  EXPECT_EQ(moved.fields.at("handed_from"), "b");
  EXPECT_EQ(moved.fields.at("handed_entry"), taken_by_b[0].second.id) << "the job's time is the original's";
  EXPECT_EQ(moved.fields.at("prompt"), "hi");
  EXPECT_EQ(moved.fields.at("session"), "conv");
  EXPECT_TRUE(read("a", moved.id).empty()) << "read after the last one read: nothing new";

  // The session moved on to a third live broker meanwhile: a handed job is not handed again.
  connection_.command(schema::alive("c", 60000));
  plain_->command({"SET", "flashq:session:conv", "c"});
  const schema::Take run = take("flashq:jobs:a", "a", moved.id, "t2", "conv");
  EXPECT_EQ(run.outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(run.deliveries, 1);
  EXPECT_EQ(get({"HGET", "flashq:job:{t2}", "owner"}), "a");
  EXPECT_EQ(get({"HGET", "flashq:job:{t2}", "stream"}), "flashq:jobs:a");
  EXPECT_EQ(get({"GET", "flashq:session:conv"}), "a") << "the broker that runs a turn owns the session";

  // The same id written again into flashq:jobs: a duplicate, whoever takes it.
  plain_->command({"XADD", "flashq:jobs", "*", "id", "t2", "prompt", "hi", "max_tokens", "4", "session", "conv"});
  const auto again = read("b");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(take(schema::kJobs, "b", again[0].second.id, "t2", "conv").outcome, schema::Take::Outcome::kDuplicate);

  // The final acknowledges the entry in the stream it is in.
  const RedisReply stored =
      connection_.command(schema::final("a", "t2", "flashq:jobs:a", moved.id, 0, protocol::FinalResult{}, 60, "", 100));
  EXPECT_EQ(stored.integer, 1) << stored.text;
  EXPECT_EQ(get({"XPENDING", "flashq:jobs:a", "flashq"}), "0");
  EXPECT_EQ(get({"XLEN", "flashq:jobs:a"}), "0");
}

TEST_F(RedisHandoverTest, AnOwnerThatIsNotAliveLosesTheSession) {
  plain_->command({"SET", "flashq:session:conv", "a"});  // a's flashq:broker:a expired (or never was)
  plain_->command({"XADD", "flashq:jobs", "*", "id", "t3", "prompt", "hi", "max_tokens", "4", "session", "conv"});
  const auto taken = read("b");
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(take(schema::kJobs, "b", taken[0].second.id, "t3", "conv").outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(get({"GET", "flashq:session:conv"}), "b");
  const int64_t ttl_ms = std::stoll(get({"PTTL", "flashq:session:conv"}));
  EXPECT_GT(ttl_ms, 0);
  EXPECT_LE(ttl_ms, 60000);
  EXPECT_EQ(get({"XLEN", "flashq:jobs:a"}), "0");

  // A broker that stops being alive (draining, no workers) deletes its key at once.
  connection_.command(schema::alive("a", 60000));
  EXPECT_EQ(get({"EXISTS", "flashq:broker:a"}), "1");
  connection_.command(schema::not_alive("a"));
  EXPECT_EQ(get({"EXISTS", "flashq:broker:a"}), "0");
}

TEST_F(RedisHandoverTest, AJobWithoutASessionIsTakenAsBefore) {
  connection_.command(schema::alive("a", 60000));
  plain_->command({"XADD", "flashq:jobs", "*", "id", "t4", "prompt", "hi", "max_tokens", "4"});
  const auto taken = read("b");
  ASSERT_EQ(taken.size(), 1u);
  const schema::Take run = take(schema::kJobs, "b", taken[0].second.id, "t4", "");
  EXPECT_EQ(run.outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(plain_->command({"KEYS", "flashq:session:*"}), std::vector<std::string>{});
  EXPECT_EQ(get({"HGET", "flashq:job:{t4}", "stream"}), "flashq:jobs");
}

TEST_F(RedisHandoverTest, AnEntryHandedToABrokerThatDiedIsClaimedFromItsStream) {
  connection_.command(schema::alive("a", 60000));
  plain_->command({"SET", "flashq:session:conv", "a"});
  plain_->command({"XADD", "flashq:jobs", "*", "id", "t5", "prompt", "hi", "max_tokens", "4", "session", "conv"});
  const auto taken = read("b");
  ASSERT_EQ(taken.size(), 1u);
  ASSERT_EQ(take(schema::kJobs, "b", taken[0].second.id, "t5", "conv").outcome, schema::Take::Outcome::kHanded);
  // a dies before reading it. A name in flashq:brokers whose stream has no group yet is skipped.
  connection_.command(schema::not_alive("a"));
  plain_->command({"SADD", "flashq:brokers", "never-started"});
  const RedisReply claimed = connection_.command(schema::claim_idle("b", 0, 10, {}));
  ASSERT_FALSE(claimed.is_error()) << claimed.text;
  const auto streams = schema::streams_of(claimed);
  ASSERT_EQ(streams.size(), 1u);
  EXPECT_EQ(streams[0].first, "flashq:jobs:a");
  ASSERT_EQ(streams[0].second.size(), 1u);
  const std::string entry = streams[0].second[0].id;
  const schema::Take run = take("flashq:jobs:a", "b", entry, "t5", "conv");
  EXPECT_EQ(run.outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(get({"GET", "flashq:session:conv"}), "b");
  EXPECT_EQ(
      connection_.command(schema::final("b", "t5", "flashq:jobs:a", entry, 0, protocol::FinalResult{}, 60, "", 100))
          .integer,
      1);
  EXPECT_EQ(get({"XPENDING", "flashq:jobs:a", "flashq"}), "0");
  EXPECT_TRUE(schema::streams_of(connection_.command(schema::claim_idle("b", 0, 10, {}))).empty()) << "nothing left";
  // Brokers that are not alive and have nothing handed to them are no longer looked at; one
  // that is alive again is.
  EXPECT_EQ(get({"SCARD", "flashq:brokers"}), "0");
  connection_.command(schema::alive("a", 60000));
  EXPECT_EQ(get({"SISMEMBER", "flashq:brokers", "a"}), "1");
  EXPECT_EQ(get({"EXISTS", "flashq:jobs:a"}), "1") << "its stream and group stay";
}

}  // namespace
}  // namespace flashq
