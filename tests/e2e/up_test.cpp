// `flashq up` (the embedded default: a broker and a worker in one process) as a user runs it:
// started on free loopback ports with the demo pair (models/demo, a target and its DFlash
// drafter), a job submitted with `flashq submit`, its result checked against `flashq generate`
// on the same model without speculation (greedy decoding on the CPU is exact: docs/decisions.md,
// "Batch invariance on the CPU"), the HTTP endpoints read, then SIGTERM: the process drains and
// exits 0. A random Llama 3 pair (make-tiny --family llama, with biases and llama3 RoPE scaling)
// is served the same way: a new family needs no change to the worker or the CLI.
#include <gtest/gtest.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_cluster.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {
namespace {

constexpr const char* kTarget = "models/demo/target";  // tests run in the repository root
constexpr const char* kDrafter = "models/demo/drafter";
constexpr int64_t kMaxTokens = 24;
constexpr const char* kPrompt = "def parse_header(line):";

// The last line of a command's output parsed as JSON (earlier lines may be log lines).
nlohmann::json last_json_line(const std::string& output) {
  std::string line = output;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  const size_t newline = line.rfind('\n');
  if (newline != std::string::npos) line = line.substr(newline + 1);
  return nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
}

class FlashqUp : public ::testing::Test {
 protected:
  // Starts `flashq up` and waits until /readyz says its worker has registered, which it does
  // once the model is loaded. A port taken by someone else between free_port() and the bind
  // makes the process exit: then it tries again on other ports.
  bool start(const std::string& target = kTarget, const std::string& drafter = kDrafter) {
    for (int tries = 0; tries < 3; ++tries) {
      frontend_ = "tcp://127.0.0.1:" + std::to_string(free_port());
      stream_ = "tcp://127.0.0.1:" + std::to_string(free_port());
      http_port_ = free_port();
      up_ = std::make_unique<ChildProcess>(
          "flashq",
          std::vector<std::string>{"up", "--model", target, "--drafter", drafter, "--slots", "2", "--device", "cpu",
                                   "--frontend", frontend_, "--stream", stream_, "--http",
                                   "127.0.0.1:" + std::to_string(http_port_), "--gateway", "127.0.0.1:0"},
          scratch_.path() / ("up-" + std::to_string(tries) + ".log"),
          ChildProcess::Environment{{"OMP_NUM_THREADS", "1"}});
      if (!up_->started()) return false;
      const bool ready = eventually([&] { return http_get(http_port_, "/readyz").status == 200 || !up_->running(); },
                                    milliseconds(60000));
      if (ready && up_->running()) return true;
      if (up_->running()) return false;  // alive but never ready: no point in other ports
    }
    return false;
  }

  void TearDown() override {
    if (HasFailure() && up_) std::cerr << "---- flashq up ----\n" << up_->log();
  }

  std::string broker_flags() const { return " --broker " + frontend_ + " --stream-endpoint " + stream_; }

  TempDir scratch_;
  std::unique_ptr<ChildProcess> up_;
  std::string frontend_, stream_;
  int http_port_ = -1;
};

TEST_F(FlashqUp, ServesAJobAndExitsZeroOnSigterm) {
  ASSERT_TRUE(start()) << "flashq up never became ready";
  EXPECT_EQ(http_get(http_port_, "/healthz").status, 200);

  const CommandResult submitted =
      run_command(bin_path("flashq") + " submit" + broker_flags() + " --id up-job --spec dflash --block-size 4" +
                  " --max-tokens " + std::to_string(kMaxTokens) + " --wait-timeout-ms 60000 --json --prompt '" +
                  kPrompt + "'");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const nlohmann::json job = last_json_line(submitted.output);
  ASSERT_TRUE(job.is_object()) << submitted.output;
  EXPECT_EQ(job.value("id", ""), "up-job");
  const std::string finish_reason = job.value("finish_reason", "");
  ASSERT_TRUE(finish_reason == "length" || finish_reason == "stop") << submitted.output;
  const std::vector<int32_t> tokens = job.at("tokens").get<std::vector<int32_t>>();
  EXPECT_FALSE(job.at("text").get<std::string>().empty()) << submitted.output;
  EXPECT_EQ(job.at("usage").at("completion_tokens").get<int64_t>(), static_cast<int64_t>(tokens.size()));
  if (finish_reason == "length") {
    EXPECT_EQ(tokens.size(), static_cast<size_t>(kMaxTokens)) << submitted.output;
  } else {
    EXPECT_LE(tokens.size(), static_cast<size_t>(kMaxTokens)) << submitted.output;
  }
  EXPECT_GE(job.at("spec_stats").at("draft_steps").get<int64_t>(), 1) << "the job ran without its drafter";

  // The same output as the model run in one process, without a broker.
  const CommandResult generated =
      run_command(bin_path("flashq") + " generate --model " + kTarget + " --device cpu --max-tokens " +
                  std::to_string(kMaxTokens) + " --json --prompt '" + kPrompt + "'");
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  const nlohmann::json plain = last_json_line(generated.output);
  ASSERT_TRUE(plain.is_object()) << generated.output;
  EXPECT_EQ(tokens, plain.at("tokens").get<std::vector<int32_t>>());
  EXPECT_EQ(job.at("text"), plain.at("text"));
  EXPECT_EQ(finish_reason, plain.value("finish_reason", ""));

  // The broker's HTTP port counts the worker and the job. The gauges refresh with the broker's
  // loop, so the counts are waited for.
  HttpResponse metrics;
  const bool counted = eventually(
      [&] {
        metrics = http_get(http_port_, "/metrics");
        return metric_value(metrics.body, "flashq_workers") == std::optional<double>(1) &&
               metric_value(metrics.body, "flashq_jobs_finished_total") == std::optional<double>(1);
      },
      milliseconds(10000));
  EXPECT_TRUE(counted) << metrics.status << "\n" << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "flashq_jobs_admitted_total"), std::optional<double>(1)) << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "flashq_generation_tokens_total"),
            std::optional<double>(static_cast<double>(tokens.size())))
      << metrics.body;

  // The embedded gateway (--gateway 127.0.0.1:0, the port printed) lists the model it serves,
  // once it has asked the broker (every second).
  const std::string log = up_->log();
  const std::size_t at = log.find("gateway http://127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << log;
  const int gateway_port = std::stoi(log.substr(at + std::string("gateway http://127.0.0.1:").size()));
  HttpResponse models;
  nlohmann::json listed;
  const bool served = eventually(
      [&] {
        models = http_get(gateway_port, "/v1/models");
        listed = nlohmann::json::parse(models.body, nullptr, false);
        return models.status == 200 && listed.is_object() && !listed.at("data").empty();
      },
      milliseconds(10000));
  ASSERT_TRUE(served) << models.status << " " << models.body;
  ASSERT_EQ(listed.at("data").size(), 1u) << models.body;
  EXPECT_EQ(listed.at("data")[0].at("id"), "target");
  EXPECT_GT(listed.at("data")[0].at("max_model_len").get<int64_t>(), 0);

  up_->signal(SIGTERM);
  EXPECT_EQ(up_->wait_exit(milliseconds(20000)), std::optional<int>(0)) << "flashq up did not exit 0 within 20 s";
}

TEST_F(FlashqUp, ServesALlamaTargetWithItsDrafterAsGenerateDoes) {
  const std::filesystem::path target = scratch_.path() / "llama-target", drafter = scratch_.path() / "llama-drafter";
  CommandResult made = run_command(bin_path("flashq-model") + " make-tiny --family llama --seed 11 --layers 3" +
                                   " --attention-bias --rope-theta 500000 --rope-scaling-factor 8" +
                                   " --original-max-position 64 --out " + target.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  made = run_command(bin_path("flashq-model") + " make-tiny --layers 1 --block-size 8 --drafter-for " +
                     target.string() + " --out " + drafter.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  ASSERT_TRUE(start(target.string(), drafter.string())) << "flashq up never became ready";

  // As text (the tokenizer's post-processor puts <|begin_of_text|> first) and as a chat (the
  // checkpoint's template writes it), each against the model run in one process.
  const std::string prompt = "The queue accepts jobs";
  for (const std::string chat : {"", " --chat"}) {
    SCOPED_TRACE(chat.empty() ? "text prompt" : "chat prompt");
    const CommandResult submitted =
        run_command(bin_path("flashq") + " submit" + broker_flags() + chat + " --spec dflash --block-size 8" +
                    " --max-tokens 16 --wait-timeout-ms 60000 --json --prompt '" + prompt + "'");
    ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
    const nlohmann::json job = last_json_line(submitted.output);
    ASSERT_TRUE(job.is_object()) << submitted.output;

    const CommandResult generated = run_command(bin_path("flashq") + " generate --model " + target.string() + chat +
                                                " --device cpu --max-tokens 16 --json --prompt '" + prompt + "'");
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
    const nlohmann::json plain = last_json_line(generated.output);
    ASSERT_TRUE(plain.is_object()) << generated.output;
    EXPECT_EQ(job.at("tokens"), plain.at("tokens"));
    EXPECT_EQ(job.at("text"), plain.at("text"));
    EXPECT_EQ(job.value("finish_reason", ""), plain.value("finish_reason", ""));
    EXPECT_EQ(job.at("usage").at("prompt_tokens"), plain.at("stats").at("prompt_tokens"));
    if (job.at("tokens").size() > 1) {
      EXPECT_GE(job.at("spec_stats").at("draft_steps").get<int64_t>(), 1) << "the job ran without its drafter";
    }
  }

  up_->signal(SIGTERM);
  EXPECT_EQ(up_->wait_exit(milliseconds(20000)), std::optional<int>(0)) << "flashq up did not exit 0 within 20 s";
}

}  // namespace
}  // namespace flashq::testing
