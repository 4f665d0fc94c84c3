// End to end, the happy path and a misbehaving subscriber: a broker and workers as processes,
// jobs submitted over loopback, streams compared with what the engine produces in one process.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

// The last line of `output` that holds a JSON object (logs may come before it).
nlohmann::json last_json_line(const std::string& output) {
  size_t end = output.size();
  while (end > 0) {
    const size_t start = output.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    const std::string line = output.substr(from, end - from);
    if (!line.empty() && line.front() == '{') return nlohmann::json::parse(line);
    if (start == std::string::npos) break;
    end = start;
  }
  return nlohmann::json();
}

TEST_F(E2eTest, StreamedTextEqualsGenerate) {
  ASSERT_TRUE(start_broker());
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));

  const std::string prompt = "The queue hums along";
  const int64_t max_tokens = 64;
  const CommandResult generated =
      run_command("OMP_NUM_THREADS=1 " + bin_path("flashq") + " generate --model '" + target_dir().string() +
                  "' --drafter '" + drafter_dir().string() + "' --prompt '" + prompt + "' --max-tokens " +
                  std::to_string(max_tokens) + " --temperature 0 --device cpu --json");
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  const nlohmann::json want = last_json_line(generated.output);
  ASSERT_TRUE(want.is_object()) << generated.output;

  auto client = connect_client();
  const JobRun run = run_job(*client, make_job("streamed-1", prompt, max_tokens));
  ASSERT_TRUE(run.final_result) << run;
  EXPECT_TRUE(is_complete_stream(run.events)) << run;
  EXPECT_EQ(run.ids(), want.at("tokens").get<std::vector<int32_t>>());
  EXPECT_EQ(run.text(), want.at("text").get<std::string>());
  EXPECT_EQ(run.finish_reason(), want.at("finish_reason").get<std::string>());
  EXPECT_EQ(run.final_result->usage.completion_tokens, static_cast<int64_t>(run.ids().size()));
  EXPECT_EQ(run.final_result->usage.prompt_tokens, want.at("stats").at("prompt_tokens").get<int64_t>());
  EXPECT_FALSE(run.final_result->error);
  // And the engine in this process agrees with both.
  expect_matches(run, reference(prompt, max_tokens));
}

// Subscribers to everything that never read, with the smallest queues ZeroMQ allows: their backlog
// is theirs (the broker sends without waiting and drops what cannot be queued), so the producer and
// a reading subscriber still get every event, and the jobs finish about as fast as without them.
TEST_F(E2eTest, SlowSubscriberDoesNotSlowOthers) {
  ASSERT_TRUE(start_broker());
  start_worker("w1", 4);
  ASSERT_TRUE(cluster_->wait_for_workers(1));

  zmq::context_t context;
  std::vector<zmq::socket_t> stalled;
  for (int i = 0; i < 3; ++i) {
    zmq::socket_t& s = stalled.emplace_back(context, zmq::socket_type::sub);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvhwm, 1);
    s.set(zmq::sockopt::rcvbuf, 1024);
    s.set(zmq::sockopt::subscribe, "");
    s.connect(cluster_->stream());
  }

  auto client = connect_client();
  StreamCollector collector(cluster_->stream());
  ASSERT_TRUE(wait_subscribed(collector, *client));

  constexpr int kJobs = 16;
  constexpr int64_t kMaxTokens = 150;
  std::vector<std::string> prompts;
  for (int i = 0; i < kJobs; ++i) prompts.push_back("Slow readers, part " + std::to_string(i) + ": the queue");
  const std::vector<Reference> want = references(prompts, kMaxTokens);

  const auto started = Clock::now();
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_NO_THROW(client->submit(make_job("slow-sub-" + std::to_string(i), prompts[i], kMaxTokens), 20000));
  }
  std::vector<JobRun> runs;
  const auto until = started + milliseconds(60000);
  for (int i = 0; i < kJobs; ++i) runs.push_back(wait_job(*client, "slow-sub-" + std::to_string(i), ms_until(until)));
  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - started);

  for (int i = 0; i < kJobs; ++i) expect_matches(runs[i], want[i], &collector);
  EXPECT_TRUE(collector.has_no_problems());
  // Generous: about 2k tokens take a second or two here; a broker blocked on a subscriber never ends.
  EXPECT_LT(elapsed.count(), 45000) << "jobs took " << elapsed.count() << " ms";
  EXPECT_TRUE(cluster_->broker().running());
}

}  // namespace
}  // namespace flashq::testing
