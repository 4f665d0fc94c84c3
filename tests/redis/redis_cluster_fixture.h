// The fixture of the Redis cluster tests: a real redis-server on a free port (with the E2eTest
// cluster of broker and worker processes), and the result streams read back from Redis the way a
// producer with only a Redis client would.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_server.h"

namespace flashq::testing {

// One job's result stream as stored in flashq:out:<id>.
struct StoredRun {
  std::vector<int64_t> seqs;
  std::vector<int32_t> tokens;
  std::string text;
  int finals = 0;
  std::string finish_reason;
  std::string error;
};

inline StoredRun read_run(RedisClient& redis, const std::string& id) {
  StoredRun run;
  for (auto& fields : redis.entries("flashq:out:{" + id + "}")) {
    run.seqs.push_back(std::stoll(fields["seq"]));
    if (fields.count("final")) {
      ++run.finals;
      const nlohmann::json final = nlohmann::json::parse(fields["final"]);
      run.finish_reason = final.value("finish_reason", "");
      run.error = final.value("error", "");
      continue;
    }
    for (int32_t token : nlohmann::json::parse(fields["token_ids"])) run.tokens.push_back(token);
    run.text += fields["text"];
  }
  return run;
}

inline ::testing::AssertionResult matches(const StoredRun& run, const Reference& want) {
  if (run.finals != 1) return ::testing::AssertionFailure() << run.finals << " finals";
  for (size_t i = 0; i < run.seqs.size(); ++i) {
    if (run.seqs[i] != static_cast<int64_t>(i)) {
      return ::testing::AssertionFailure() << "entry " << i << " has seq " << run.seqs[i];
    }
  }
  if (run.finish_reason != want.finish_reason) {
    return ::testing::AssertionFailure() << "finish " << run.finish_reason << " (" << run.error << "), want "
                                         << want.finish_reason;
  }
  if (run.tokens != want.tokens) return ::testing::AssertionFailure() << "tokens differ";
  if (run.text != want.text) {
    const auto [got, expected] = std::mismatch(run.text.begin(), run.text.end(), want.text.begin(), want.text.end());
    const size_t at = static_cast<size_t>(got - run.text.begin());
    return ::testing::AssertionFailure() << "text differs from byte " << at << " of " << want.text.size() << ": got '"
                                         << run.text.substr(at, 24) << "', want '" << want.text.substr(at, 24) << "'";
  }
  return ::testing::AssertionSuccess();
}

class RedisClusterTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    redis_ = std::make_unique<RedisServer>(scratch_.path() / "redis");
    ASSERT_TRUE(redis_->start());
  }

  std::vector<std::string> redis_flags(const std::string& consumer) const {
    return {"--redis", redis_->url(), "--redis-consumer", consumer, "--redis-claim-idle-ms", "1500"};
  }

  static std::vector<std::string> prompts(int count) {
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) out.push_back("job " + std::to_string(i) + ": the queue hums");
    return out;
  }

  // Waits until every job has a final in Redis; true when all do.
  bool wait_finals(const std::vector<std::string>& ids, milliseconds timeout) {
    RedisClient redis(redis_->port());
    size_t done = 0;
    const bool all = eventually(
        [&] {
          while (done < ids.size()) {
            const std::vector<std::string> state = redis.command({"HGET", "flashq:job:{" + ids[done] + "}", "state"});
            if (state.empty() || state[0] != "finished") return false;
            ++done;
          }
          return true;
        },
        timeout);
    if (!all) ADD_FAILURE() << done << " of " << ids.size() << " jobs finished";
    return all;
  }

  void xadd_job(RedisClient& redis, const std::string& id, const std::string& prompt, int64_t max_tokens,
                const std::vector<std::string>& extra = {}) {
    std::vector<std::string> command = {"XADD", "flashq:jobs", "*", "id", id, "prompt", prompt, "max_tokens",
                                        std::to_string(max_tokens)};
    command.insert(command.end(), extra.begin(), extra.end());
    ASSERT_EQ(redis.command(command).size(), 1u) << "XADD " << id;
  }

  std::unique_ptr<RedisServer> redis_;
};

}  // namespace flashq::testing
