// The status hash flashq:job:<id> as the scripts keep it (against a real redis-server): the job's
// metadata for STATUS from any broker, and the times of its first assignment and first token on
// Redis's clock, which a broker that takes the job over (a restart, a claim) counts its figures from.
#include <gtest/gtest.h>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_job_fields.h"
#include "broker/redis/redis_schema.h"
#include "broker/redis/redis_url.h"
#include "tests/protocol/protocol_test_util.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

namespace flashq {
namespace {

namespace schema = redis_schema;
using testing::RedisServer;

class RedisStatusHashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    ASSERT_TRUE(connection_.ensure_connected()) << connection_.last_error();
    ASSERT_FALSE(connection_.command(schema::create_group()).is_error());
  }

  std::string field(const std::string& id, const std::string& name) {
    const RedisReply reply = connection_.command({"HGET", schema::job_key(id), name});
    return reply.is_nil() ? "(nil)" : reply.text;
  }

  int64_t redis_now_ms() {
    const RedisReply time = connection_.command({"TIME"});
    return std::stoll(time.elements.at(0).text) * 1000 + std::stoll(time.elements.at(1).text) / 1000;
  }

  // A job written the way a Redis client would, read by consumer "a": its entry id.
  std::string write_and_read(const std::vector<std::string>& fields) {
    RedisCommand add = {"XADD", schema::kJobs, "*"};
    add.insert(add.end(), fields.begin(), fields.end());
    const std::string entry = connection_.command(add).text;
    connection_.command(schema::create_handover_group("a"));
    connection_.command(schema::read_new("a", 10, "0", {}));
    return entry;
  }

  schema::Take take(const std::string& id, const std::string& entry, const std::string& metadata = "") {
    return schema::take_of(connection_.command(schema::take(schema::kJobs, "a", id, entry, {.metadata_json = metadata})));
  }

  testing::TempDir dir_;
  RedisServer server_{dir_.path() / "redis"};
  RedisConnection connection_{parse_redis_url(server_.url())};
};

TEST_F(RedisStatusHashTest, IntakeKeepsTheJobsMetadataForStatus) {
  const protocol::Job job = protocol::testing::full_job();
  ASSERT_TRUE(job.metadata);
  const RedisReply stored = connection_.command(schema::intake(job));
  ASSERT_FALSE(stored.is_error()) << stored.text;
  const std::string kept = field(job.id, "metadata");
  EXPECT_EQ(kept, metadata_to_json(*job.metadata));
  EXPECT_EQ(metadata_from_json(kept), *job.metadata) << "STATUS carries the bytes the job was submitted with";
}

TEST_F(RedisStatusHashTest, TakeKeepsTheMetadataOfAJobARedisClientWrote) {
  const std::string entry = write_and_read({"id", "r1", "prompt", "hi", "metadata", R"({"app":"x","n":[1,2]})"});
  EXPECT_EQ(take("r1", entry, R"({"app":"x","n":[1,2]})").outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(field("r1", "metadata"), R"({"app":"x","n":[1,2]})");
  // Taken again (a restart reading its own pending entry): what the hash holds stays.
  take("r1", entry, R"({"app":"other"})");
  EXPECT_EQ(field("r1", "metadata"), R"({"app":"x","n":[1,2]})");
  const std::string plain = write_and_read({"id", "r2", "prompt", "hi"});
  take("r2", plain);
  EXPECT_EQ(field("r2", "metadata"), "(nil)") << "a job without metadata has none";
}

TEST_F(RedisStatusHashTest, FirstAssignmentAndFirstTokenAreKeptOnceOnRedisClock) {
  const std::string entry = write_and_read({"id", "t1", "prompt", "hi"});
  const schema::Take first = take("t1", entry);
  ASSERT_EQ(first.outcome, schema::Take::Outcome::kRun);
  EXPECT_NEAR(static_cast<double>(first.redis_now_ms), static_cast<double>(redis_now_ms()), 2000.0);
  EXPECT_GE(first.redis_now_ms, schema::entry_time_ms(entry)) << "the same clock as the entry ids";
  EXPECT_EQ(first.first_assigned_ms, 0);
  EXPECT_EQ(first.first_token_ms, 0);

  connection_.command(schema::mark_running("t1", 1));
  const std::string assigned = field("t1", "first_assigned_ms");
  ASSERT_NE(assigned, "(nil)");
  EXPECT_GE(std::stoll(assigned), schema::entry_time_ms(entry));
  EXPECT_EQ(field("t1", "attempt"), "1");
  connection_.command(schema::mark_running("t1", 2));  // a second attempt does not move the first
  EXPECT_EQ(field("t1", "first_assigned_ms"), assigned);
  EXPECT_EQ(field("t1", "attempt"), "2");

  // An event without tokens (a step whose tokens were cut) is no first token.
  connection_.command(schema::events("a", "t1", {protocol::Event{.id = "t1", .seq = 0, .text = "x"}}, 1000));
  EXPECT_EQ(field("t1", "first_token_ms"), "(nil)");
  connection_.command(schema::events("a", "t1", {protocol::Event{.id = "t1", .seq = 1, .token_ids = {5, 6}}}, 1000));
  const std::string first_token = field("t1", "first_token_ms");
  ASSERT_NE(first_token, "(nil)");
  EXPECT_GE(std::stoll(first_token), std::stoll(assigned));
  connection_.command(schema::events("a", "t1", {protocol::Event{.id = "t1", .seq = 2, .token_ids = {7}}}, 1000));
  EXPECT_EQ(field("t1", "first_token_ms"), first_token);

  // A broker taking the job over gets both back.
  const schema::Take again = take("t1", entry);
  EXPECT_EQ(again.first_assigned_ms, std::stoll(assigned));
  EXPECT_EQ(again.first_token_ms, std::stoll(first_token));
  EXPECT_EQ(again.attempt, 2);
}

TEST_F(RedisStatusHashTest, AFinishedOrExpiredJobIsNotMarkedRunning) {
  connection_.command({"HSET", schema::job_key("done"), "state", "finished"});
  connection_.command(schema::mark_running("done", 3));
  EXPECT_EQ(field("done", "state"), "finished");
  EXPECT_EQ(field("done", "first_assigned_ms"), "(nil)");
  connection_.command(schema::mark_running("gone", 1));
  EXPECT_EQ(connection_.command({"EXISTS", schema::job_key("gone")}).integer, 0) << "no hash made up without expiry";
}

}  // namespace
}  // namespace flashq
