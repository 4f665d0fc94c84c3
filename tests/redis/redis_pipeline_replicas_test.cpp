// The pipeline's writes that wait for replicas (--redis-wait-replicas), against a real primary and
// replica: a handler runs only once a WAIT after its write says the replicas have it; one WAIT
// closes a batch of many writes; a WAIT that falls short refuses what may be refused and holds the
// rest until the replicas have it.
#include <gtest/gtest.h>

#include <thread>

#include "broker/redis/redis_pipeline.h"
#include "broker/redis/redis_url.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

namespace flashq {
namespace {

using testing::RedisServer;
using Replication = RedisPipeline::Replication;
using OnFailure = RedisPipeline::OnFailure;

class RedisPipelineReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(primary_.start({"--repl-diskless-sync-delay", "0"}));
    ASSERT_TRUE(start_replica());
    ASSERT_TRUE(connection_.ensure_connected()) << connection_.last_error();
    pipeline_.require_replicas(1, 2000);  // a replica on a loaded machine answers well within this
  }

  bool start_replica() {
    if (!replica_.start({"--replicaof", "127.0.0.1", std::to_string(primary_.port())})) return false;
    testing::RedisClient plain(primary_.port());
    return testing::eventually(
        [&] {
          for (const std::string& line : plain.command({"INFO", "replication"})) {
            if (line.find("state=online") != std::string::npos) return true;
          }
          return false;
        },
        std::chrono::milliseconds(10000));
  }

  // WAIT commands the primary has answered so far.
  int64_t waits_answered() {
    testing::RedisClient plain(primary_.port());
    for (const std::string& line : plain.command({"INFO", "commandstats"})) {
      const size_t at = line.find("cmdstat_wait:calls=");
      if (at != std::string::npos) return std::stoll(line.substr(at + 19));
    }
    return 0;
  }

  testing::TempDir dir_;
  RedisServer primary_{dir_.path() / "primary"};
  RedisServer replica_{dir_.path() / "replica"};
  RedisConnection connection_{parse_redis_url(primary_.url()), std::chrono::milliseconds(5000)};  // above WAIT's
  RedisPipeline pipeline_;
};

TEST_F(RedisPipelineReplicasTest, HandlersRunOnceTheReplicasHaveTheWritesWithOneWaitABatch) {
  std::vector<std::string> order;
  for (const char* item : {"a", "b", "c"}) {
    pipeline_.add({"RPUSH", "log", item}, [&, item](const RedisReply& r) { order.push_back(r.is_error() ? "error" : item); },
                  OnFailure::kRetry, Replication::kReplicas);
  }
  pipeline_.add({"GET", "nothing"}, [&](const RedisReply&) { order.push_back("read"); }, OnFailure::kDrop);
  ASSERT_TRUE(pipeline_.flush(connection_));
  EXPECT_EQ(order, (std::vector<std::string>{"read", "a", "b", "c"}))
      << "the read answers at once; the writes once the WAIT after them came back";
  EXPECT_EQ(waits_answered(), 1) << "one WAIT for the batch";
  EXPECT_TRUE(pipeline_.empty());
  testing::RedisClient on_replica(replica_.port());
  EXPECT_EQ(on_replica.command({"LRANGE", "log", "0", "-1"}), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(RedisPipelineReplicasTest, AShortWaitRefusesWhatMayBeRefusedAndHoldsTheRest) {
  replica_.kill();
  std::string intake, event;
  pipeline_.add({"RPUSH", "intake", "j1"}, [&](const RedisReply& r) { intake = r.is_error() ? r.text : "ok"; },
                OnFailure::kDrop, Replication::kReplicas);
  pipeline_.add({"RPUSH", "events", "e1"}, [&](const RedisReply& r) { event = r.is_error() ? r.text : "ok"; },
                OnFailure::kRetry, Replication::kReplicas);
  ASSERT_TRUE(pipeline_.flush(connection_));
  EXPECT_NE(intake.find("too few replicas"), std::string::npos) << intake;
  EXPECT_EQ(event, "") << "held, not refused: it must reach whoever waits for it";
  EXPECT_EQ(pipeline_.retained(), 1u);
  EXPECT_FALSE(pipeline_.empty());

  ASSERT_TRUE(start_replica());
  ASSERT_TRUE(pipeline_.flush(connection_));  // a WAIT with nothing new: the held write's
  EXPECT_EQ(event, "ok");
  EXPECT_TRUE(pipeline_.empty());
}

TEST_F(RedisPipelineReplicasTest, HeldWritesAreSentAgainAfterALostConnection) {
  replica_.kill();
  int delivered = 0;
  pipeline_.add({"INCR", "counter"}, [&](const RedisReply& r) { delivered += !r.is_error(); }, OnFailure::kRetry,
                Replication::kReplicas);
  ASSERT_TRUE(pipeline_.flush(connection_));
  EXPECT_EQ(delivered, 0);
  primary_.kill();  // the primary dies with the write the replicas never got
  ASSERT_TRUE(primary_.start({"--repl-diskless-sync-delay", "0"}));
  ASSERT_TRUE(start_replica());
  ASSERT_TRUE(testing::eventually(
      [&] {
        if (!connection_.ensure_connected()) return false;
        pipeline_.flush(connection_);
        return delivered == 1;
      },
      std::chrono::milliseconds(10000)));
  EXPECT_TRUE(pipeline_.empty());
}

}  // namespace
}  // namespace flashq
