// A Llama checkpoint and its DFlash drafter through the executables: flashq-model make-tiny
// --family llama (biases, llama3 RoPE scaling) and --drafter-for, inspect naming the options, the
// drafter's config carrying the target's RoPE,
// flashq generate with and without the drafter giving the same tokens, and a RoPE scaling kind
// not implemented refused with exit code 2 naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "shared/json_file.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {
namespace {

class LlamaCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    CommandResult made = run_command(bin_path("flashq-model") + " make-tiny --family llama --seed 5 --layers 3" +
                                     " --attention-bias --mlp-bias --rope-theta 500000 --rope-scaling-factor 8" +
                                     " --original-max-position 64 --out " + target().string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
    made = run_command(bin_path("flashq-model") + " make-tiny --layers 2 --block-size 8 --drafter-for " +
                       target().string() + " --out " + drafter().string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::filesystem::path target() { return dir_->path() / "target"; }
  static std::filesystem::path drafter() { return dir_->path() / "drafter"; }

  static CommandResult generate(const std::filesystem::path& model, const std::string& extra) {
    return run_command(bin_path("flashq") + " generate --model " + model.string() +
                       " --prompt 'The queue accepts jobs' --max-tokens 24 --ignore-eos --json " + extra);
  }

  static TempDir* dir_;
  TempDir scratch_;
};
TempDir* LlamaCli::dir_ = nullptr;

TEST_F(LlamaCli, MakeTinyWritesTheConfigLlamaConfigWrites) {
  const nlohmann::json config = read_json_file(target() / "config.json");
  EXPECT_EQ(config.at("model_type"), "llama");
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config.at("attention_bias"), true);
  EXPECT_EQ(config.at("mlp_bias"), true);
  EXPECT_EQ(config.at("rope_theta"), 500000.0);
  EXPECT_EQ(config.at("rope_scaling").at("rope_type"), "llama3");
  EXPECT_EQ(config.at("rope_scaling").at("factor"), 8.0);
  EXPECT_EQ(config.at("rope_scaling").at("original_max_position_embeddings"), 64);

  CommandResult r = run_command(bin_path("flashq-model") + " inspect " + target().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("family llama"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("attention biases, MLP biases, llama3 RoPE scaling x8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.layers.2.self_attn.q_proj.bias"), std::string::npos) << r.output;
}

// The drafter's config keeps the target's RoPE and attention biases; its layers are Qwen3's
// (docs/dflash.md §3), so it names no MLP bias.
TEST_F(LlamaCli, DrafterConfigCarriesTheTargetsRopeAndAttentionBias) {
  const nlohmann::json config = read_json_file(drafter() / "config.json");
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"DFlashDraftModel"}));
  EXPECT_EQ(config.at("attention_bias"), true);
  EXPECT_FALSE(config.contains("mlp_bias"));
  EXPECT_EQ(config.at("rope_theta"), 500000.0);
  EXPECT_EQ(config.at("rope_scaling").at("rope_type"), "llama3");
  EXPECT_EQ(config.at("head_dim"), 16);
  EXPECT_EQ(config.at("num_target_layers"), 3);
  EXPECT_EQ(config.at("block_size"), 8);
}

TEST_F(LlamaCli, GenerateWithTheDrafterGivesTheTokensOfTheTargetAlone) {
  const CommandResult plain = generate(target(), "--spec off");
  const CommandResult drafted = generate(target(), "--spec dflash --drafter " + drafter().string());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(drafted.exit_code, 0) << drafted.output;
  const nlohmann::json a = nlohmann::json::parse(plain.output), b = nlohmann::json::parse(drafted.output);
  EXPECT_EQ(a.at("tokens").size(), 24u);
  EXPECT_EQ(a.at("tokens"), b.at("tokens"));
  EXPECT_GT(b.at("stats").at("draft_steps").get<int64_t>(), 0);
}

TEST_F(LlamaCli, GenerateRefusesAScalingKindNotImplementedNamingIt) {
  std::filesystem::copy(target(), scratch_.path() / "model");
  nlohmann::json config = read_json_file(scratch_.path() / "model" / "config.json");
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  write_text_file(scratch_.path() / "model" / "config.json", config.dump());
  const CommandResult r = generate(scratch_.path() / "model", "");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("dynamic"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace flashq::testing
