// config.json of the hybrid families as Hugging Face writes them: Qwen3.5's multimodal composite
// (the language model's keys in text_config, a few at the top level), Qwen3.5-MoE's and
// Qwen3-Next's text configs. The layer plan (layer_types, else every full_attention_interval-th
// layer attends), the linear-attention sizes, the partial rotary and the experts are read with
// the config classes' defaults; impossible values are refused naming the key.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/model/config_refusal.h"
#include "worker/model/model_config.h"

namespace flashq {
namespace {

// Qwen/Qwen3.5-9B's config.json as published: a Qwen3_5Config around its text_config (the
// vision_config cut down to what this test needs).
nlohmann::json qwen3_5_9b_config() {
  nlohmann::json layer_types = nlohmann::json::array();
  for (int i = 0; i < 32; ++i) layer_types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  nlohmann::json text = nlohmann::json::parse(R"({
    "attention_bias": false, "attn_output_gate": true, "eos_token_id": 248044, "full_attention_interval": 4,
    "head_dim": 256, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
    "model_type": "qwen3_5_text", "mtp_num_hidden_layers": 1, "num_attention_heads": 16,
    "num_hidden_layers": 32, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10], "rope_type": "default",
                        "rope_theta": 10000000, "partial_rotary_factor": 0.25},
    "vocab_size": 248320})");
  text["layer_types"] = layer_types;
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
          {"model_type", "qwen3_5"},
          {"tie_word_embeddings", false},
          {"text_config", text},
          {"vision_config", {{"depth", 27}}}};
}

TEST(HybridConfig, ReadsQwen3_5sCompositeConfigFromItsTextConfig) {
  const ModelConfig c = parse_model_config(qwen3_5_9b_config(), "config.json");
  EXPECT_EQ(c.model_type, "qwen3_5");
  EXPECT_EQ(c.architecture, "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rotary_dims, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_TRUE(c.attention_output_gate);
  EXPECT_TRUE(c.zero_centred_norms);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{248044});
  const LinearAttentionConfig& l = c.linear_attention;
  EXPECT_EQ(l.key_heads, 16);
  EXPECT_EQ(l.value_heads, 32);
  EXPECT_EQ(l.key_dim(), 2048);
  EXPECT_EQ(l.value_dim(), 4096);
  EXPECT_EQ(l.conv_kernel, 4);
  EXPECT_FALSE(l.grouped_projection);
  EXPECT_EQ(attention_layers(c), (std::vector<int64_t>{3, 7, 11, 15, 19, 23, 27, 31}));
  EXPECT_EQ(c.moe.num_experts, 0);
}

TEST(HybridConfig, WithoutLayerTypesEveryIntervalthLayerAttends) {
  nlohmann::json config = qwen3_5_9b_config()["text_config"];
  config.erase("layer_types");
  config["full_attention_interval"] = 3;
  config["num_hidden_layers"] = 7;
  EXPECT_EQ(attention_layers(parse_model_config(config, "config.json")), (std::vector<int64_t>{2, 5}));
}

TEST(HybridConfig, ReadsQwen3_5MoeAndQwen3NextExperts) {
  nlohmann::json moe = qwen3_5_9b_config()["text_config"];
  moe["model_type"] = "qwen3_5_moe_text";
  moe.erase("intermediate_size");  // the MoE text config has no dense MLP
  moe.update({{"num_experts", 256},
              {"num_experts_per_tok", 8},
              {"moe_intermediate_size", 512},
              {"shared_expert_intermediate_size", 512}});
  const ModelConfig c = parse_model_config(moe, "config.json");
  EXPECT_EQ(c.model_type, "qwen3_5_moe");
  EXPECT_EQ(c.moe.layout, ExpertLayout::kFusedGateUp);
  EXPECT_TRUE(c.moe.normalize_top_k);
  EXPECT_TRUE(c.moe.sparse_layer(0));
  EXPECT_EQ(c.moe.shared_expert_intermediate_size, 512);

  nlohmann::json next = moe;
  next["model_type"] = "qwen3_next";
  next["intermediate_size"] = 5120;
  next.erase("rope_parameters");
  next.update({{"rope_theta", 10000000},
               {"partial_rotary_factor", 0.5},
               {"norm_topk_prob", false},
               {"decoder_sparse_step", 1},
               {"mlp_only_layers", {2}}});
  const ModelConfig n = parse_model_config(next, "config.json");
  EXPECT_EQ(n.model_type, "qwen3_next");
  EXPECT_TRUE(n.linear_attention.grouped_projection);
  EXPECT_EQ(n.moe.layout, ExpertLayout::kPerExpert);
  EXPECT_FALSE(n.moe.normalize_top_k);
  EXPECT_FALSE(n.moe.sparse_layer(2));
  EXPECT_TRUE(n.moe.sparse_layer(3));
  EXPECT_EQ(n.rotary_dims, 128);
}

TEST(HybridConfig, RefusesWhatNoPublishedModelComputesNamingTheKey) {
  nlohmann::json config = qwen3_5_9b_config();
  config["text_config"]["attn_output_gate"] = false;
  EXPECT_NE(refusal(config, ErrorCode::kUnsupported).find("attn_output_gate"), std::string::npos);

  config = qwen3_5_9b_config();
  config["text_config"]["linear_num_value_heads"] = 24;
  EXPECT_NE(refusal(config, ErrorCode::kBadConfig).find("linear_num_value_heads"), std::string::npos);

  config = qwen3_5_9b_config();
  config["text_config"]["layer_types"][3] = "sliding_attention";
  EXPECT_NE(refusal(config, ErrorCode::kUnsupported).find("layer_types"), std::string::npos);

  config = qwen3_5_9b_config();
  for (auto& type : config["text_config"]["layer_types"]) type = "linear_attention";
  EXPECT_NE(refusal(config, ErrorCode::kBadConfig).find("full_attention"), std::string::npos);

  config = qwen3_5_9b_config();
  config["text_config"]["rope_parameters"]["partial_rotary_factor"] = 0.001;
  EXPECT_NE(refusal(config, ErrorCode::kBadConfig).find("partial_rotary_factor"), std::string::npos);

  config = qwen3_5_9b_config();
  config["text_config"]["num_hidden_layers"] = 1111111111111111LL;
  config["text_config"].erase("layer_types");
  EXPECT_NE(refusal(config, ErrorCode::kBadConfig).find("num_hidden_layers"), std::string::npos);
}

}  // namespace
}  // namespace flashq
