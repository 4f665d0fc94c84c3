// With Redis, a job's latencies count from when its entry was added to flashq:jobs (the entry
// id's milliseconds), not from when a broker took it: an entry written 3 s ago by a Redis client
// shows at least 3 s of queue time, time to first token and end-to-end latency (docs/operations.md §5).
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "tests/redis/redis_cluster_fixture.h"

namespace flashq::testing {
namespace {

using RedisMetricsTest = RedisClusterTest;

TEST_F(RedisMetricsTest, LatenciesCountFromTheEntrysTimeInTheJobsStream) {
  ASSERT_TRUE(start_broker(redis_flags("a")));
  start_worker("w1", 1);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  const std::vector<std::string> histograms = {"flashq_time_to_first_token_seconds", "flashq_request_queue_time_seconds",
                                               "flashq_e2e_request_latency_seconds"};
  std::map<std::string, double> before;
  for (const std::string& h : histograms) {
    before[h + "_count"] = cluster_->metric(h + "_count").value_or(0);
    before[h + "_sum"] = cluster_->metric(h + "_sum").value_or(0);
  }

  RedisClient redis(redis_->port());
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const std::string backdated = std::to_string(now_ms - 3000) + "-0";
  ASSERT_EQ(redis.command({"XADD", "flashq:jobs", backdated, "id", "aged-1", "prompt", "hello world", "max_tokens", "4"}),
            std::vector<std::string>{backdated});
  ASSERT_TRUE(wait_finals({"aged-1"}, milliseconds(20000)));

  for (const std::string& h : histograms) {
    EXPECT_EQ(cluster_->metric(h + "_count").value_or(0) - before[h + "_count"], 1) << h;
    const double seconds = cluster_->metric(h + "_sum").value_or(0) - before[h + "_sum"];
    EXPECT_GE(seconds, 3.0) << h << ": counted from when the broker took the entry";
    EXPECT_LT(seconds, 30.0) << h;
  }
}

}  // namespace
}  // namespace flashq::testing
