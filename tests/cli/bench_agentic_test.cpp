// flashq-bench agentic --quick end to end on a tiny model: the engine figures run in process, the
// routing figure with a real flashq-broker and three flashq-worker processes; every figure is in
// the report with numbers that make sense; a bad option is exit 2 naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {
namespace {

class BenchAgentic : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    CommandResult made =
        run_command(bin_path("flashq-model") + " make-tiny --seed 5 --out " + (dir_->path() / "model").string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static CommandResult bench(const std::string& args) {
    return run_command(bin_path("flashq-bench") + " agentic --model " + (dir_->path() / "model").string() +
                       " --log-dir " + (dir_->path() / "logs").string() + " " + args);
  }

  static TempDir* dir_;
};
TempDir* BenchAgentic::dir_ = nullptr;

TEST_F(BenchAgentic, QuickRunReportsEveryFigure) {
  CommandResult r = bench("--quick --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output.substr(r.output.rfind("\n{") + 1));

  // 1. Later turns extend earlier ones; each arm timed every later turn.
  const nlohmann::json& prefix = out.at("prefix_cache");
  EXPECT_EQ(prefix.at("text"), "chat template, plain messages");
  EXPECT_TRUE(prefix.at("later_prompts_extend_earlier_turns").get<bool>());
  EXPECT_GE(prefix.at("system_prompt_tokens").get<int>(), 160);
  EXPECT_GT(prefix.at("later_turn_prompt_tokens_mean").get<double>(), prefix.at("system_prompt_tokens").get<double>());
  EXPECT_GT(prefix.at("last_prompt_tokens").get<double>(), prefix.at("later_turn_prompt_tokens_mean").get<double>());
  ASSERT_EQ(prefix.at("arms").size(), 2u);
  for (const nlohmann::json& arm : prefix.at("arms")) {
    EXPECT_GT(arm.at("first_turn_ttft_s").get<double>(), 0.0);
    EXPECT_GT(arm.at("later_turn_ttft_s").get<double>(), 0.0);
    EXPECT_EQ(arm.at("later_turn_ttft_s_each").size(), 4u);  // 2 conversations x 2 later turns
  }
  // The same outputs with the prefix cache as without; later turns start sooner with it.
  EXPECT_TRUE(prefix.at("outputs_identical").get<bool>());
  EXPECT_GT(prefix.at("later_turn_ttft_ratio").get<double>(), 1.0);
  EXPECT_EQ(prefix.at("arms")[0].at("prefix_hit_tokens").get<int>(), 0);
  EXPECT_GT(prefix.at("arms")[1].at("prefix_hit_tokens").get<int>(), 0);

  // 2. The fixed memory holds exactly two whole-length caches; paged caches hold more sequences.
  const nlohmann::json& concurrency = out.at("concurrency");
  EXPECT_DOUBLE_EQ(concurrency.at("used_fraction_of_max_length").get<double>(), 0.25);
  ASSERT_EQ(concurrency.at("arms").size(), 2u);
  EXPECT_EQ(concurrency.at("arms")[0].at("peak_running").get<int>(), 2);
  EXPECT_GT(concurrency.at("peak_running_ratio").get<double>(), 2.0);

  // 3. Both routing policies served every turn of every conversation.
  const nlohmann::json& routing = out.at("routing");
  ASSERT_EQ(routing.at("arms").size(), 2u);
  EXPECT_EQ(routing.at("arms")[0].at("routing"), "cache-aware");
  EXPECT_EQ(routing.at("arms")[1].at("routing"), "least-loaded");
  for (const nlohmann::json& arm : routing.at("arms")) {
    EXPECT_EQ(arm.at("jobs").get<int>(), 12);
    EXPECT_GT(arm.at("completion_tokens").get<int>(), 0);
    EXPECT_LE(arm.at("completion_tokens").get<int>(), 12 * 4);
    EXPECT_GT(arm.at("completion_tokens_per_s").get<double>(), 0.0);
    EXPECT_GT(arm.at("later_turn_prompt_tokens").get<double>(), 0.0);
    const double rate = arm.at("later_turn_prefix_hit_rate").get<double>();
    EXPECT_GT(rate, 0.0);
    EXPECT_LE(rate, 1.0);
    EXPECT_LE(arm.at("reusable_hit_rate").get<double>(), 1.0);
  }

  // A session's later turns go to the worker holding its earlier ones.
  EXPECT_GT(routing.at("arms")[0].at("later_turn_prefix_hit_rate").get<double>(), 0.5);
  EXPECT_GT(routing.at("arms")[0].at("reusable_hit_rate").get<double>(), 0.5);

  // 4. Decode speed at each batch.
  const nlohmann::json& decode = out.at("decode_speed");
  ASSERT_EQ(decode.at("batches").size(), 2u);
  for (const nlohmann::json& row : decode.at("batches")) {
    EXPECT_GT(row.at("whole_tokens_per_s").get<double>(), 0.0);
    EXPECT_GT(row.at("paged_tokens_per_s").get<double>(), 0.0);
  }
}

TEST_F(BenchAgentic, UnknownFigureIsRefused) {
  CommandResult r = bench("--figures 1,5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--figures: numbers 1 to 4"), std::string::npos) << r.output;
}

TEST_F(BenchAgentic, OneTurnIsRefused) {
  CommandResult r = bench("--turns 1 --figures 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--turns (at least 2)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace flashq::testing
