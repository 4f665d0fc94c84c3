// config.json of the Qwen3-MoE family as Hugging Face writes it (Qwen3-30B-A3B's): the experts'
// keys are read, which layers are sparse follows Qwen3MoeDecoderLayer's rule
// (decoder_sparse_step, mlp_only_layers), Qwen3MoeConfig's defaults fill what a config leaves
// out, and impossible values are refused naming the key. A drafter for such a target has dense
// layers whatever the target's experts.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/model/config_refusal.h"
#include "worker/model/drafter_config.h"
#include "worker/model/model_config.h"

namespace flashq {
namespace {

// Qwen/Qwen3-30B-A3B's config.json (transformers 4.51).
nlohmann::json qwen3_30b_a3b_config() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
    "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
    "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
}

TEST(Qwen3MoeConfig, ReadsTheRealQwen3_30B_A3BConfig) {
  const ModelConfig c = parse_model_config(qwen3_30b_a3b_config(), "config.json");
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qk_norm) << "Qwen3's attention: q/k norm";
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.intermediate_size, 6144);
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.experts_per_token, 8);
  EXPECT_EQ(c.moe.intermediate_size, 768);
  EXPECT_TRUE(c.moe.normalize_top_k);
  EXPECT_EQ(c.moe.routing_order, RoutingOrder::kSoftmaxThenTopK);
  EXPECT_EQ(c.moe.activation.kind, ExpertActivationKind::kSwiglu);
  EXPECT_EQ(c.moe.layout, ExpertLayout::kPerExpert);
  for (int64_t layer = 0; layer < 48; ++layer) EXPECT_TRUE(c.moe.sparse_layer(layer)) << layer;
  const MoeRouting routing = c.moe.routing();
  EXPECT_EQ(routing.top_k, 8);
  EXPECT_TRUE(routing.normalize_top_k);
}

TEST(Qwen3MoeConfig, SparseLayersFollowTheStepAndTheDenseList) {
  nlohmann::json json = qwen3_30b_a3b_config();
  json["num_hidden_layers"] = 8;
  json["decoder_sparse_step"] = 2;
  json["mlp_only_layers"] = {3, 5};
  const ModelConfig c = parse_model_config(json, "config.json");
  std::vector<int64_t> sparse;
  for (int64_t layer = 0; layer < 8; ++layer) {
    if (c.moe.sparse_layer(layer)) sparse.push_back(layer);
  }
  // (layer + 1) % 2 == 0: 1, 3, 5, 7; without the dense 3 and 5.
  EXPECT_EQ(sparse, (std::vector<int64_t>{1, 7}));
}

TEST(Qwen3MoeConfig, AbsentKeysTakeQwen3MoeConfigsDefaults) {
  nlohmann::json json = qwen3_30b_a3b_config();
  for (const char* key : {"head_dim", "num_key_value_heads", "num_experts", "num_experts_per_tok",
                          "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"}) {
    json.erase(key);
  }
  const ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_EQ(c.head_dim, 2048 / 32) << "no head_dim default: hidden / heads";
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.experts_per_token, 8);
  EXPECT_EQ(c.moe.intermediate_size, 768);
  EXPECT_FALSE(c.moe.normalize_top_k) << "Qwen3MoeConfig's norm_topk_prob defaults to false";
  EXPECT_EQ(c.moe.sparse_step, 1);
  EXPECT_TRUE(c.moe.dense_layers.empty());
}

TEST(Qwen3MoeConfig, NumLocalExpertsIsTheAliasOfNumExperts) {
  nlohmann::json json = qwen3_30b_a3b_config();
  json.erase("num_experts");
  json["num_local_experts"] = 16;
  EXPECT_EQ(parse_model_config(json, "config.json").moe.num_experts, 16);
}

TEST(Qwen3MoeConfig, ImpossibleExpertsAreRefusedNamingTheKey) {
  nlohmann::json json = qwen3_30b_a3b_config();
  json["num_experts_per_tok"] = 129;
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("num_experts_per_tok"), std::string::npos);
  json = qwen3_30b_a3b_config();
  json["num_experts"] = 0;
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("num_experts"), std::string::npos);
  json = qwen3_30b_a3b_config();
  json["mlp_only_layers"] = {48};
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("mlp_only_layers"), std::string::npos);
  json["mlp_only_layers"] = "all";
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("mlp_only_layers"), std::string::npos);
  json = qwen3_30b_a3b_config();
  json["decoder_sparse_step"] = -1;
  EXPECT_NE(refusal(json, ErrorCode::kBadConfig).find("decoder_sparse_step"), std::string::npos);
}

TEST(Qwen3MoeConfig, ADrafterForAMixtureOfExpertsTargetHasDenseLayers) {
  const ModelConfig target = parse_model_config(qwen3_30b_a3b_config(), "config.json");
  nlohmann::json drafter = qwen3_30b_a3b_config();
  drafter["architectures"] = {"DFlashDraftModel"};
  drafter["num_hidden_layers"] = 5;
  drafter["dflash_config"] = {{"mask_token_id", 151669}, {"target_layer_ids", {1, 12, 23, 34, 45}}};
  const DrafterConfig d = parse_drafter_config(drafter, "drafter/config.json", target);
  EXPECT_EQ(d.layers.moe.num_experts, 0);
  for (int64_t layer = 0; layer < 5; ++layer) EXPECT_FALSE(d.layers.moe.sparse_layer(layer));
}

}  // namespace
}  // namespace flashq
