// Models across brokers, as the scripts keep them (against a real redis-server): an entry naming a
// model its taker does not serve moves to that model's stream, which brokers serving the model
// read; the brokers lease the models they serve, and every broker reads back which models are
// served, and since when, to reject jobs for a model nobody serves.
#include <gtest/gtest.h>

#include <thread>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_schema.h"
#include "broker/redis/redis_url.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

namespace flashq {
namespace {

namespace schema = redis_schema;
using testing::RedisServer;

class RedisModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    ASSERT_TRUE(connection_.ensure_connected()) << connection_.last_error();
    ASSERT_FALSE(connection_.command(schema::create_group()).is_error());
  }

  RedisReply run(const RedisCommand& command) {
    RedisReply reply = connection_.command(command);
    EXPECT_FALSE(reply.is_error()) << command.at(0) << " " << (command.size() > 3 ? command.at(3) : "") << ": " << reply.text;
    return reply;
  }

  std::string xadd(const std::vector<std::string>& fields) {
    RedisCommand add = {"XADD", schema::kJobs, "*"};
    add.insert(add.end(), fields.begin(), fields.end());
    return run(add).text;
  }

  // New entries for `consumer` from flashq:jobs and the streams of `models`, as (stream, entry).
  std::vector<std::pair<std::string, schema::Entry>> read(const std::string& consumer,
                                                          const std::vector<std::string>& models) {
    connection_.command(schema::create_handover_group(consumer));
    for (const std::string& model : models) connection_.command(schema::create_model_group(model));
    std::vector<std::pair<std::string, schema::Entry>> out;
    for (auto& [stream, entries] : schema::streams_of(run(schema::read_new(consumer, 10, "0", models)))) {
      for (schema::Entry& entry : entries) out.emplace_back(stream, std::move(entry));
    }
    return out;
  }

  schema::Take take(const std::string& stream, const std::string& consumer, const std::string& id,
                    const std::string& entry, const std::string& model, bool served_here,
                    const std::string& session = "") {
    return schema::take_of(run(schema::take(stream, consumer, id, entry,
                                            {.session = session,
                                             .session_ttl_ms = 60000,
                                             .model = model,
                                             .model_served_here = served_here})));
  }

  std::string field(const std::string& id, const std::string& name) {
    const RedisReply reply = connection_.command({"HGET", schema::job_key(id), name});
    return reply.is_nil() ? "(nil)" : reply.text;
  }

  const schema::ServedModel* find(const schema::ServedModels& view, const std::string& name) {
    for (const schema::ServedModel& model : view.models) {
      if (model.name == name) return &model;
    }
    return nullptr;
  }

  testing::TempDir dir_;
  RedisServer server_{dir_.path() / "redis"};
  RedisConnection connection_{parse_redis_url(server_.url())};
};

TEST_F(RedisModelsTest, AnEntryForAModelItsTakerDoesNotServeMovesToTheModelsStream) {
  const std::string original = xadd({"id", "m1", "prompt", "hi", "model", "big"});
  const auto delivered = read("a", {});
  ASSERT_EQ(delivered.size(), 1u);
  const schema::Take sorted = take(schema::kJobs, "a", "m1", original, "big", false);
  EXPECT_EQ(sorted.outcome, schema::Take::Outcome::kSorted);
  EXPECT_EQ(sorted.moved_to, schema::model_jobs_key("big"));
  EXPECT_EQ(run({"XLEN", schema::kJobs}).integer, 0) << "acknowledged and deleted in flashq:jobs";
  EXPECT_EQ(run({"XPENDING", schema::kJobs, schema::kGroup}).elements.at(0).integer, 0);
  EXPECT_EQ(field("m1", "stream"), schema::model_jobs_key("big"));
  EXPECT_EQ(run({"SISMEMBER", schema::kModels, "big"}).integer, 1);

  // A broker without the model does not read its stream; one serving it does, and runs the job.
  EXPECT_TRUE(read("a", {}).empty());
  const auto for_b = read("b", {"big"});
  ASSERT_EQ(for_b.size(), 1u);
  EXPECT_EQ(for_b[0].first, schema::model_jobs_key("big"));
  const schema::Entry& copy = for_b[0].second;
  EXPECT_EQ(field("m1", "entry"), copy.id);
  EXPECT_EQ(copy.fields.at("sorted_entry"), original) << "its submission time stays the original's";
  EXPECT_EQ(copy.fields.at("prompt"), "hi");
  const schema::Take taken = take(schema::model_jobs_key("big"), "b", "m1", copy.id, "big", true);
  EXPECT_EQ(taken.outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(field("m1", "owner"), "b");
  // The original entry, delivered again (a claim of a stale read), is a duplicate now.
  EXPECT_EQ(take(schema::kJobs, "a", "m1", original, "big", false).outcome, schema::Take::Outcome::kDuplicate);
}

TEST_F(RedisModelsTest, AServingTakerOrAJobWithoutAModelRunsWhereItIsRead) {
  const std::string served = xadd({"id", "s1", "prompt", "hi", "model", "small"});
  const std::string any = xadd({"id", "s2", "prompt", "hi"});
  read("a", {});
  EXPECT_EQ(take(schema::kJobs, "a", "s1", served, "small", true).outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(take(schema::kJobs, "a", "s2", any, "", false).outcome, schema::Take::Outcome::kRun);
  EXPECT_EQ(run({"EXISTS", schema::model_jobs_key("small")}).integer, 0);
}

TEST_F(RedisModelsTest, EntriesOfAModelStreamAreNeverSortedAgain) {
  const std::string original = xadd({"id", "n1", "prompt", "hi", "model", "big"});
  read("a", {});
  take(schema::kJobs, "a", "n1", original, "big", false);
  const auto delivered = read("c", {"big"});
  ASSERT_EQ(delivered.size(), 1u);
  // A broker reading a model's stream without serving it (it sweeps jobs nobody serves) runs it.
  EXPECT_EQ(take(schema::model_jobs_key("big"), "c", "n1", delivered[0].second.id, "big", false).outcome,
            schema::Take::Outcome::kRun);
}

TEST_F(RedisModelsTest, ServedModelsAreLeasedAndReadBackWithWhenTheyWereLastServed) {
  schema::ServedModels view = schema::served_of(run(schema::served("a", 60000, {"x"})));
  view = schema::served_of(run(schema::served("b", 60000, {"y", "x"})));
  ASSERT_NE(find(view, "x"), nullptr);
  ASSERT_NE(find(view, "y"), nullptr);
  EXPECT_TRUE(find(view, "x")->live);
  EXPECT_TRUE(find(view, "y")->live);
  EXPECT_NEAR(static_cast<double>(find(view, "x")->last_served_ms), static_cast<double>(view.redis_now_ms), 1.0);

  // b stops serving y: nobody does now, and it was served until this moment. With a job waiting
  // in its stream, y stays known.
  xadd({"id", "y1", "prompt", "hi", "model", "y"});
  read("a", {});
  const std::string entry = run({"XRANGE", schema::kJobs, "-", "+"}).elements.at(0).elements.at(0).text;
  take(schema::kJobs, "a", "y1", entry, "y", false);
  view = schema::served_of(run(schema::served("b", 60000, {"x"})));
  ASSERT_NE(find(view, "y"), nullptr);
  EXPECT_FALSE(find(view, "y")->live);
  EXPECT_GT(find(view, "y")->last_served_ms, 0);
  EXPECT_LE(find(view, "y")->last_served_ms, view.redis_now_ms);
  EXPECT_TRUE(find(view, "x")->live) << "a and b still serve x";

  // A lease that is not renewed runs out: a broker that died serves nothing once it has.
  view = schema::served_of(run(schema::served("c", 100, {"z"})));
  EXPECT_TRUE(find(view, "z")->live);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  view = schema::served_of(run(schema::served("a", 60000, {"x"})));
  EXPECT_EQ(find(view, "z"), nullptr) << "not served, and no job waits for it: forgotten";
  view = schema::served_of(run(schema::served("c", 100, {"z"})));
  EXPECT_TRUE(find(view, "z")->live) << "served again";
}

TEST_F(RedisModelsTest, ClaimsCoverTheStreamsOfTheModelsGiven) {
  const std::string original = xadd({"id", "c1", "prompt", "hi", "model", "big"});
  read("a", {});
  take(schema::kJobs, "a", "c1", original, "big", false);
  ASSERT_EQ(read("dead", {"big"}).size(), 1u);  // delivered to a broker that then dies
  EXPECT_TRUE(schema::streams_of(run(schema::claim_idle("b", 0, 10, {}))).empty()) << "not a stream b reads";
  const auto claimed = schema::streams_of(run(schema::claim_idle("b", 0, 10, {"big"})));
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].first, schema::model_jobs_key("big"));
  ASSERT_EQ(claimed[0].second.size(), 1u);
}

TEST_F(RedisModelsTest, ASessionIsHandedOnlyToAnOwnerServingItsModel) {
  run({"SET", "flashq:broker:owner", "1"});
  run({"SET", schema::session_key("s"), "owner"});
  const std::string first = xadd({"id", "h1", "prompt", "hi", "model", "x", "session", "s"});
  read("a", {});
  EXPECT_EQ(take(schema::kJobs, "a", "h1", first, "x", true, "s").outcome, schema::Take::Outcome::kRun)
      << "the owner does not serve x: the turn runs here";
  run({"SET", schema::session_key("s"), "owner"});
  run(schema::served("owner", 60000, {"x"}));
  const std::string second = xadd({"id", "h2", "prompt", "hi", "model", "x", "session", "s"});
  read("a", {});
  const schema::Take handed = take(schema::kJobs, "a", "h2", second, "x", true, "s");
  EXPECT_EQ(handed.outcome, schema::Take::Outcome::kHanded);
  EXPECT_EQ(handed.moved_to, "owner");
}

}  // namespace
}  // namespace flashq
