// config.json of the gpt-oss family as Hugging Face writes it (gpt-oss-20b's): the experts,
// sinks, layer types and YaRN are read, GptOssConfig's defaults fill what a config leaves out,
// experts not stored in MXFP4 and bad layer types are refused naming the key, and a drafter whose
// config says gpt_oss still has Qwen3 layers (no sinks, no experts). A ring KV cache keeps only a
// sliding layer's window.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/model/config_refusal.h"
#include "worker/model/drafter_config.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_config.h"

namespace flashq {
namespace {

// openai/gpt-oss-20b's config.json (transformers 4.55).
nlohmann::json gpt_oss_20b_config() {
  nlohmann::json layer_types = nlohmann::json::array();
  for (int i = 0; i < 24; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  nlohmann::json config = nlohmann::json::parse(R"({
    "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 2880, "max_position_embeddings": 131072, "model_type": "gpt_oss",
    "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
    "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false,
    "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
      "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
      "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", "use_cache": true,
    "vocab_size": 201088})");
  config["layer_types"] = layer_types;
  return config;
}

TEST(GptOssConfig, ReadsTheRealGptOss20bConfig) {
  const ModelConfig c = parse_model_config(gpt_oss_20b_config(), "config.json");
  EXPECT_EQ(c.model_type, "gpt_oss");
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_sinks);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.rope_factor, 32.0);
  EXPECT_EQ(c.sliding_window, 128);
  ASSERT_EQ(c.sliding_layers.size(), 24u);
  for (int64_t layer = 0; layer < 24; ++layer) {
    EXPECT_EQ(attention_window(c, layer), layer % 2 == 0 ? 128 : 0) << layer;
  }
  EXPECT_EQ(c.moe.num_experts, 32);
  EXPECT_EQ(c.moe.experts_per_token, 4);
  EXPECT_EQ(c.moe.intermediate_size, 2880);
  EXPECT_EQ(c.moe.routing_order, RoutingOrder::kTopKThenSoftmax);
  EXPECT_FALSE(c.moe.normalize_top_k);
  EXPECT_EQ(c.moe.activation.kind, ExpertActivationKind::kClampedSwiglu);
  EXPECT_FLOAT_EQ(c.moe.activation.alpha, 1.702f);
  EXPECT_FLOAT_EQ(c.moe.activation.limit, 7.0f);
  EXPECT_EQ(c.moe.layout, ExpertLayout::kStackedMxfp4);
  for (int64_t layer = 0; layer < 24; ++layer) EXPECT_TRUE(c.moe.sparse_layer(layer));
}

TEST(GptOssConfig, AbsentKeysTakeGptOssConfigsDefaults) {
  nlohmann::json json = gpt_oss_20b_config();
  for (const char* key : {"head_dim", "num_key_value_heads", "sliding_window", "layer_types", "swiglu_limit",
                          "attention_bias", "num_experts_per_tok", "rms_norm_eps"}) {
    json.erase(key);
  }
  const ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.moe.experts_per_token, 4);
  EXPECT_FLOAT_EQ(c.moe.activation.limit, 7.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  // Sliding where (i + 1) % 2: the even layers.
  for (int64_t layer = 0; layer < 24; ++layer) EXPECT_EQ(c.sliding_layers[layer], layer % 2 == 0) << layer;
}

TEST(GptOssConfig, TheConfigsOwnLayerTypesAndAliasesAreRead) {
  nlohmann::json json = gpt_oss_20b_config();
  json["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 24; ++i) json["layer_types"].push_back(i < 4 ? "sliding_attention" : "full_attention");
  json.erase("num_local_experts");
  json["num_experts"] = 16;
  json["swiglu_alpha"] = 1.5;
  const ModelConfig c = parse_model_config(json, "config.json");
  for (int64_t layer = 0; layer < 24; ++layer) EXPECT_EQ(c.sliding_layers[layer], layer < 4) << layer;
  EXPECT_EQ(c.moe.num_experts, 16);
  EXPECT_FLOAT_EQ(c.moe.activation.alpha, 1.5f);
}

TEST(GptOssConfig, RefusesWhatItCannotRunNamingTheKey) {
  nlohmann::json json = gpt_oss_20b_config();
  json.erase("quantization_config");  // a dequantized (bf16) copy: experts of another layout
  EXPECT_NE(refusal(json, ErrorCode::kUnsupported).find("quantization_config"), std::string::npos);
  json = gpt_oss_20b_config();
  json["layer_types"][3] = "chunked_attention";
  EXPECT_NE(refusal(json, ErrorCode::kUnsupported).find("layer_types"), std::string::npos);
  json = gpt_oss_20b_config();
  json["layer_types"].erase(0);
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("layer_types"), std::string::npos);
  json = gpt_oss_20b_config();
  json["num_experts_per_tok"] = 33;
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("num_experts_per_tok"), std::string::npos);
  json = gpt_oss_20b_config();
  json["sliding_window"] = 0;
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("sliding_window"), std::string::npos);
}

TEST(GptOssConfig, OtherFamiliesStillRefuseSlidingLayers) {
  nlohmann::json json = gpt_oss_20b_config();
  json["model_type"] = "llama";
  json["architectures"] = {"LlamaForCausalLM"};
  EXPECT_NE(refusal(json, ErrorCode::kUnsupported).find("layer_types"), std::string::npos);
}

TEST(GptOssConfig, ADrafterWhoseConfigSaysGptOssHasQwen3Layers) {
  const ModelConfig target = parse_model_config(gpt_oss_20b_config(), "config.json");
  // As z-lab/gpt-oss-20b-DFlash's config is copied in public code: the target's keys, 8 full
  // layers, a block of 8.
  nlohmann::json drafter = gpt_oss_20b_config();
  drafter["architectures"] = {"DFlashDraftModel"};
  drafter["num_hidden_layers"] = 8;
  drafter["intermediate_size"] = 7680;
  drafter["layer_types"] = std::vector<std::string>(8, "full_attention");
  drafter.erase("head_dim");
  drafter["block_size"] = 8;
  drafter["dflash_config"] = {{"mask_token_id", 200000}, {"target_layer_ids", {1, 6, 11, 16, 21}}};
  const DrafterConfig d = parse_drafter_config(drafter, "drafter/config.json", target);
  EXPECT_EQ(d.layers.moe.num_experts, 0);
  EXPECT_FALSE(d.layers.attention_sinks);
  EXPECT_TRUE(d.layers.qk_norm);
  EXPECT_TRUE(d.layers.attention_bias);
  EXPECT_EQ(d.layers.head_dim, 64) << "GptOssConfig's head_dim default";
  EXPECT_EQ(d.layers.rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(d.layers.intermediate_size, 7680);
  for (int64_t layer = 0; layer < 8; ++layer) EXPECT_EQ(attention_window(d.layers, layer), 0);
}

// A drafter config copied from gpt-oss's keeps its layer_types but says nothing of
// use_sliding_window: read as Qwen3Config (z-lab's DFlashDraftModel's class), its sliding layers
// are causal without a window, its full ones non-causal (docs/dflash.md §2.5).
TEST(GptOssConfig, ADrafterWithSlidingLayersReadsThemAsQwen3ConfigDoes) {
  const ModelConfig target = parse_model_config(gpt_oss_20b_config(), "config.json");
  nlohmann::json drafter = gpt_oss_20b_config();
  drafter["architectures"] = {"DFlashDraftModel"};
  drafter["num_hidden_layers"] = 2;
  drafter["layer_types"] = {"sliding_attention", "full_attention"};
  drafter["dflash_config"] = {{"mask_token_id", 200000}, {"target_layer_ids", {1, 21}}};
  const DrafterConfig d = parse_drafter_config(drafter, "drafter/config.json", target);
  ASSERT_EQ(d.layer_attention.size(), 2u);
  EXPECT_TRUE(d.layer_attention[0].causal);
  EXPECT_EQ(d.layer_attention[0].window, 0) << "sliding_window without use_sliding_window";
  EXPECT_FALSE(d.layer_attention[1].causal);
  drafter["use_sliding_window"] = true;
  EXPECT_EQ(parse_drafter_config(drafter, "drafter/config.json", target).layer_attention[0].window, 128);
}

TEST(RingKvCache, ASlidingLayerKeepsOnlyItsWindowAndTheRowsOfOnePass) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  const int64_t window = 128, max_length = 4096;
  KvCache plain(*backend, 4, 8, 64, max_length);
  KvCache rings(*backend, 4, 8, 64, max_length, {window, 0, window, 0});
  const int64_t row_bytes = 2 * 8 * 64 * 4;
  EXPECT_EQ(plain.whole_bytes(), 4 * max_length * row_bytes);
  EXPECT_EQ(rings.whole_bytes(), (2 * max_length + 2 * (window + KvCache::kMaxRowsPerPass)) * row_bytes);
  EXPECT_EQ(rings.ring_rows(), window + KvCache::kMaxRowsPerPass);
  EXPECT_TRUE(rings.ring(0));
  EXPECT_FALSE(rings.ring(1));
  rings.reserve(1000);
  EXPECT_EQ(rings.keys(0).dim(0), window + KvCache::kMaxRowsPerPass) << "a ring never grows";
  EXPECT_GE(rings.keys(1).dim(0), 1000);
  // A sequence shorter than the ring needs no more than itself.
  KvCache short_rings(*backend, 2, 8, 64, 100, {window, 0});
  EXPECT_EQ(short_rings.ring_rows(), 100);
}

}  // namespace
}  // namespace flashq
