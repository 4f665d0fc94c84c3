// A DFlash drafter's config.json read as z-lab's DFlashDraftModel reads it (docs/dflash.md §2.5,
// §3): which layers are causal and windowed (layer_types, use_sliding_window, sliding_window,
// is_causal), YaRN RoPE of its own, and a typed refusal, naming the key, for what stays
// unimplemented.
#include "worker/model/drafter_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "shared/error.h"
#include "worker/model/model_config.h"

namespace flashq {
namespace {

// Qwen/Qwen3-4B's keys that a drafter reads (docs/dflash.md §1).
nlohmann::json qwen3_4b_config() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
    "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
    "vocab_size": 151936, "tie_word_embeddings": true, "max_position_embeddings": 40960})");
}

// A three-layer drafter in z-lab's layout for that target.
nlohmann::json drafter_json() {
  nlohmann::json json = qwen3_4b_config();
  json["architectures"] = {"DFlashDraftModel"};
  json["num_hidden_layers"] = 3;
  json["num_target_layers"] = 36;
  json["block_size"] = 16;
  json["dflash_config"] = {{"mask_token_id", 151669}, {"target_layer_ids", {1, 17, 33}}};
  return json;
}

DrafterConfig parse(const nlohmann::json& json) {
  return parse_drafter_config(json, "drafter/config.json", parse_model_config(qwen3_4b_config(), "config.json"));
}

// The error's code, and that its message names `key`.
void expect_refusal(const nlohmann::json& json, ErrorCode code, const std::string& key) {
  try {
    parse(json);
    ADD_FAILURE() << "accepted: " << json.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

nlohmann::json with_sliding(std::vector<std::string> types, bool use_window, int64_t window) {
  nlohmann::json json = drafter_json();
  json["layer_types"] = types;
  json["use_sliding_window"] = use_window;
  json["sliding_window"] = window;
  return json;
}

TEST(DrafterConfig, LayersWithoutLayerTypesAreFullAndNonCausal) {
  for (const DrafterLayerAttention& a : parse(drafter_json()).layer_attention) {
    EXPECT_FALSE(a.causal);
    EXPECT_EQ(a.window, 0);
  }
}

// z-lab's Qwen3DFlashAttention: is_causal = (layer type == sliding_attention) unless is_causal is
// set; the window is sliding_window on sliding layers only.
TEST(DrafterConfig, SlidingLayersAreCausalAndWindowedFullLayersAreNeither) {
  const DrafterConfig c = parse(with_sliding({"sliding_attention", "full_attention", "sliding_attention"}, true, 2048));
  ASSERT_EQ(c.layer_attention.size(), 3u);
  EXPECT_TRUE(c.layer_attention[0].causal);
  EXPECT_EQ(c.layer_attention[0].window, 2048);
  EXPECT_FALSE(c.layer_attention[1].causal);
  EXPECT_EQ(c.layer_attention[1].window, 0);
  EXPECT_TRUE(c.layer_attention[2].causal);
  EXPECT_EQ(c.layer_attention[2].window, 2048);
}

TEST(DrafterConfig, IsCausalDecidesForEveryLayer) {
  nlohmann::json json = with_sliding({"sliding_attention", "full_attention", "sliding_attention"}, true, 64);
  json["is_causal"] = false;  // as z-lab's DFlash2 drafter config says: windows looking both ways
  for (const DrafterLayerAttention& a : parse(json).layer_attention) EXPECT_FALSE(a.causal);
  EXPECT_EQ(parse(json).layer_attention[0].window, 64);
  json["is_causal"] = true;
  for (const DrafterLayerAttention& a : parse(json).layer_attention) EXPECT_TRUE(a.causal);
  EXPECT_EQ(parse(json).layer_attention[1].window, 0);
}

// Qwen3Config drops sliding_window unless use_sliding_window: the layer stays causal, unwindowed.
TEST(DrafterConfig, TheWindowAppliesOnlyWithUseSlidingWindow) {
  const DrafterConfig c = parse(with_sliding({"sliding_attention", "sliding_attention", "full_attention"}, false, 4));
  EXPECT_TRUE(c.layer_attention[0].causal);
  EXPECT_EQ(c.layer_attention[0].window, 0);
  nlohmann::json no_window = with_sliding({"sliding_attention", "full_attention", "full_attention"}, false, 4);
  no_window.erase("sliding_window");
  EXPECT_EQ(parse(no_window).layer_attention[0].window, 0);
}

TEST(DrafterConfig, RefusesAttentionPatternsNotImplementedNamingTheKey) {
  expect_refusal(with_sliding({"sliding_attention", "linear_attention", "full_attention"}, true, 8),
                 ErrorCode::kUnsupported, "layer_types");
  nlohmann::json derived = drafter_json();
  derived["use_sliding_window"] = true;  // the list would come from max_window_layers
  derived["sliding_window"] = 8;
  expect_refusal(derived, ErrorCode::kUnsupported, "use_sliding_window");
}

TEST(DrafterConfig, RefusesInconsistentAttentionKeysNamingTheKey) {
  expect_refusal(with_sliding({"sliding_attention", "full_attention"}, true, 8), ErrorCode::kBadConfig, "layer_types");
  expect_refusal(with_sliding({"sliding_attention", "full_attention", "full_attention"}, true, 0),
                 ErrorCode::kBadConfig, "sliding_window");
  nlohmann::json missing = with_sliding({"sliding_attention", "full_attention", "full_attention"}, true, 8);
  missing.erase("sliding_window");
  expect_refusal(missing, ErrorCode::kBadConfig, "sliding_window");
  nlohmann::json not_bool = drafter_json();
  not_bool["is_causal"] = "yes";
  expect_refusal(not_bool, ErrorCode::kBadConfig, "is_causal");
}

// Its RoPE is its own config's, YaRN included, as transformers 5 writes it (rope_parameters).
TEST(DrafterConfig, ReadsYarnRopeOfItsOwn) {
  nlohmann::json json = drafter_json();
  json.erase("rope_theta");
  json["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 500000.0},
                             {"factor", 4.0},       {"original_max_position_embeddings", 32768},
                             {"beta_fast", 32.0},   {"beta_slow", 1.0}};
  json["max_position_embeddings"] = 131072;
  const DrafterConfig c = parse(json);
  EXPECT_EQ(c.layers.rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.layers.rope_theta, 500000.0);
  EXPECT_EQ(c.layers.rope_factor, 4.0);
  EXPECT_EQ(c.layers.rope_original_max_position, 32768);
  json["rope_parameters"].erase("original_max_position_embeddings");  // _compute_yarn_parameters' fallback
  EXPECT_EQ(parse(json).layers.rope_original_max_position, 131072);
  json["rope_parameters"]["rope_type"] = "dynamic";
  expect_refusal(json, ErrorCode::kUnsupported, "dynamic");
}

// z-lab/dflash tests/fixtures/dflash2-config.json, as published, and a target of its shape.
nlohmann::json dflash2_fixture() {
  return nlohmann::json::parse(R"({
    "architectures": ["DFlash2DraftModel"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 200000, "is_causal": false,
    "dflash_config": {"block_size": 16, "conv_group_size": 16, "conv_kernel_size": 2,
      "final_logit_softcapping": 20.0, "mask_token_id": 201818, "output_multiplier": 0.19611613513818404,
      "selector_rank": 256, "selector_top_k": 16, "target_layer_ids": [1, 13, 25, 37, 49]},
    "dtype": "bfloat16", "eos_token_id": 200001, "head_dim": 128, "hidden_act": "silu", "hidden_size": 6656,
    "initializer_range": 0.02, "intermediate_size": 19968,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                    "sliding_attention"],
    "max_position_embeddings": 131072, "max_window_layers": 5, "model_type": "qwen3", "num_attention_heads": 32,
    "num_hidden_layers": 5, "num_key_value_heads": 8, "num_target_layers": 52, "pad_token_id": 200018,
    "rms_norm_eps": 1e-05, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
    "sliding_window": 2048, "tie_word_embeddings": false, "transformers_version": "5.15.0", "use_cache": false,
    "use_sliding_window": true, "vocab_size": 202048})");
}

DrafterConfig parse_dflash2(const nlohmann::json& json) {
  nlohmann::json target = qwen3_4b_config();
  target["hidden_size"] = 6656;
  target["num_hidden_layers"] = 52;
  target["vocab_size"] = 202048;
  return parse_drafter_config(json, "drafter/config.json", parse_model_config(target, "config.json"));
}

void expect_dflash2_refusal(const nlohmann::json& json, ErrorCode code, const std::string& key) {
  try {
    parse_dflash2(json);
    ADD_FAILURE() << "accepted: " << json.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(DrafterConfig, ReadsThePublishedDFlash2Config) {
  const DrafterConfig c = parse_dflash2(dflash2_fixture());
  ASSERT_TRUE(c.dflash2.has_value());
  EXPECT_EQ(c.dflash2->conv_kernel_size, 2);
  EXPECT_EQ(c.dflash2->conv_group_size, 16);
  EXPECT_EQ(c.dflash2->selector_rank, 256);
  EXPECT_EQ(c.dflash2->selector_top_k, 16);
  EXPECT_DOUBLE_EQ(c.output_multiplier, 0.19611613513818404);
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 20.0);
  EXPECT_EQ(c.block_size, 16);
  EXPECT_EQ(c.mask_token_id, 201818);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int64_t>{1, 13, 25, 37, 49}));
  EXPECT_EQ(c.layers.rope_theta, 500000.0);
  for (const DrafterLayerAttention& a : c.layer_attention) {
    EXPECT_FALSE(a.causal) << "is_causal false";
    EXPECT_EQ(a.window, 2048);
  }
  EXPECT_NEAR(drafter_logit(c, 100.0f), 20.0 * std::tanh(100.0 * 0.19611613513818404 / 20.0), 1e-4);
  EXPECT_FALSE(parse(drafter_json()).dflash2.has_value()) << "a DFlash drafter has none";
}

TEST(DrafterConfig, RefusesADFlash2ConfigMissingOrBreakingItsKeysNamingTheKey) {
  for (const char* key : {"conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"}) {
    nlohmann::json json = dflash2_fixture();
    json["dflash_config"].erase(key);
    expect_dflash2_refusal(json, ErrorCode::kBadConfig, key);
    json["dflash_config"][key] = 0;
    expect_dflash2_refusal(json, ErrorCode::kBadConfig, key);
  }
  nlohmann::json json = dflash2_fixture();
  json["dflash_config"]["conv_group_size"] = 100;  // does not divide 6656
  expect_dflash2_refusal(json, ErrorCode::kBadConfig, "conv_group_size");
  json = dflash2_fixture();
  json["dflash_config"]["selector_top_k"] = 300000;
  expect_dflash2_refusal(json, ErrorCode::kBadConfig, "selector_top_k");
  json = dflash2_fixture();
  json["dflash_config"]["output_multiplier"] = -1.0;
  expect_dflash2_refusal(json, ErrorCode::kBadConfig, "output_multiplier");
  json = dflash2_fixture();
  json["dflash_config"]["input_embedding_scale"] = 2.0;
  expect_dflash2_refusal(json, ErrorCode::kUnsupported, "input_embedding_scale");
  json = dflash2_fixture();
  json["architectures"] = {"DFlash3DraftModel"};
  expect_dflash2_refusal(json, ErrorCode::kBadConfig, "architectures");
}

// Keys z-lab reads with _draft_value: from dflash_config, else from the top level.
TEST(DrafterConfig, ReadsDFlash2KeysFromTheTopLevelToo) {
  nlohmann::json json = dflash2_fixture();
  json["selector_top_k"] = json["dflash_config"]["selector_top_k"];
  json["dflash_config"].erase("selector_top_k");
  json["final_logit_softcapping"] = 0.0;  // <= 0: none
  json["dflash_config"].erase("final_logit_softcapping");
  const DrafterConfig c = parse_dflash2(json);
  EXPECT_EQ(c.dflash2->selector_top_k, 16);
  EXPECT_EQ(c.final_logit_softcapping, 0.0);
}

}  // namespace
}  // namespace flashq
