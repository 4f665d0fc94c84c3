// YaRN RoPE scaling read from config.json as transformers' _compute_yarn_parameters reads it:
// gpt-oss's published rope_scaling (in both spellings), the defaults of the keys it may leave out
// (beta_fast 32, beta_slow 1, also when 0; the original context from max_position_embeddings;
// truncate true; the attention factor 0.1 ln(factor) + 1, or from mscale and mscale_all_dim),
// what reaches the kernels (rope_options), and the values refused with kBadConfig naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "shared/error.h"
#include "worker/model/model_config.h"

namespace flashq {
namespace {

// A Qwen3 config (a family this build reads) with gpt-oss's rope settings: rope_theta 150000 and
// rope_scaling as openai/gpt-oss-20b's config.json states it.
nlohmann::json config_with_gpt_oss_rope() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 64, "hidden_size": 2880,
    "intermediate_size": 2880, "max_position_embeddings": 131072, "num_attention_heads": 64,
    "num_hidden_layers": 2, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "vocab_size": 201088,
    "rope_theta": 150000,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false}})");
}

ErrorCode code_of(const nlohmann::json& config, std::string* message) {
  try {
    parse_model_config(config, "dir/config.json");
  } catch (const Error& e) {
    *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "config was accepted: " << config.dump();
  return ErrorCode::kInternal;
}

TEST(YarnConfig, ReadsGptOssRopeScaling) {
  const ModelConfig c = parse_model_config(config_with_gpt_oss_rope(), "config.json");
  EXPECT_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.rope_factor, 32.0);
  EXPECT_EQ(c.rope_beta_fast, 32.0);
  EXPECT_EQ(c.rope_beta_slow, 1.0);
  EXPECT_EQ(c.rope_original_max_position, 4096);
  EXPECT_FALSE(c.rope_truncate);
  EXPECT_NEAR(c.rope_attention_factor, 0.1 * std::log(32.0) + 1.0, 1e-12);  // 1.3466
  const RopeOptions rope = rope_options(c);
  EXPECT_EQ(rope.scaling, RopeScaling::kYarn);
  EXPECT_EQ(rope.theta, 150000.0f);
  EXPECT_EQ(rope.factor, 32.0f);
  EXPECT_EQ(rope.beta_fast, 32.0f);
  EXPECT_EQ(rope.beta_slow, 1.0f);
  EXPECT_EQ(rope.original_max_position, 4096.0f);
  EXPECT_FALSE(rope.truncate);
  EXPECT_FLOAT_EQ(rope_attention_factor(rope), 1.3465736f);
  EXPECT_NO_THROW(require_rope(rope, "test"));
}

TEST(YarnConfig, ReadsRopeParametersAsTransformers5WritesThem) {
  auto json = config_with_gpt_oss_rope();
  json["rope_parameters"] = json["rope_scaling"];
  json["rope_parameters"]["rope_theta"] = 150000.0;
  json.erase("rope_scaling");
  json.erase("rope_theta");
  const ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(c.rope_original_max_position, 4096);
  EXPECT_FALSE(c.rope_truncate);
}

TEST(YarnConfig, KeysLeftOutTakeThePublishedDefaults) {
  auto json = config_with_gpt_oss_rope();
  json["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"beta_fast", 0}, {"beta_slow", nullptr}};
  const ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.rope_beta_fast, 32.0);  // 0 and null: `or 32`, `or 1`
  EXPECT_EQ(c.rope_beta_slow, 1.0);
  EXPECT_EQ(c.rope_original_max_position, 131072);  // max_position_embeddings
  EXPECT_TRUE(c.rope_truncate);
  EXPECT_NEAR(c.rope_attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-12);

  json["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 1.0}};
  EXPECT_EQ(parse_model_config(json, "config.json").rope_attention_factor, 1.0);  // no scaling, no factor
}

TEST(YarnConfig, AttentionFactorIsTheGivenOneOrTheMscaleRatio) {
  auto json = config_with_gpt_oss_rope();
  json["rope_scaling"]["attention_factor"] = 1.5;
  EXPECT_EQ(parse_model_config(json, "config.json").rope_attention_factor, 1.5);
  EXPECT_FLOAT_EQ(rope_options(parse_model_config(json, "config.json")).attention_factor, 1.5f);

  json = config_with_gpt_oss_rope();
  json["rope_scaling"]["mscale"] = 1.0;
  json["rope_scaling"]["mscale_all_dim"] = 0.5;
  const double ln = std::log(32.0);
  EXPECT_NEAR(parse_model_config(json, "config.json").rope_attention_factor, (0.1 * ln + 1.0) / (0.05 * ln + 1.0),
              1e-12);
  json["rope_scaling"].erase("mscale_all_dim");  // one alone is not used
  EXPECT_NEAR(parse_model_config(json, "config.json").rope_attention_factor, 0.1 * ln + 1.0, 1e-12);
}

TEST(YarnConfig, RefusesValuesYarnCannotUseNamingTheKey) {
  struct Case {
    const char* key;
    nlohmann::json value;
  };
  for (const Case& c :
       {Case{"factor", 0.5}, Case{"factor", nullptr}, Case{"beta_fast", -3.0}, Case{"beta_slow", 64.0},
        Case{"beta_slow", "one"}, Case{"original_max_position_embeddings", -4096},
        Case{"original_max_position_embeddings", 40.5}, Case{"truncate", "no"}, Case{"attention_factor", -1.0}}) {
    auto json = config_with_gpt_oss_rope();
    json["rope_scaling"][c.key] = c.value;
    std::string message;
    EXPECT_EQ(code_of(json, &message), ErrorCode::kBadConfig) << c.key << " " << c.value.dump();
    // beta_slow above beta_fast is beta_fast's fault as much as its own: either is named.
    const bool named = message.find(c.key) != std::string::npos || message.find("beta_fast") != std::string::npos;
    EXPECT_TRUE(named) << message;
    EXPECT_NE(message.find("dir/config.json"), std::string::npos) << message;
  }
}

// Without either key the original context is the family's max_position_embeddings default
// (Qwen3Config's 32768), as transformers reads it from the config class.
TEST(YarnConfig, OriginalContextFallsBackToTheFamilysMaxPositionEmbeddings) {
  auto json = config_with_gpt_oss_rope();
  json["rope_scaling"].erase("original_max_position_embeddings");
  json.erase("max_position_embeddings");
  EXPECT_EQ(parse_model_config(json, "config.json").rope_original_max_position, 32768);
}

}  // namespace
}  // namespace flashq
