// config.json of the Llama family as Hugging Face writes it (Llama 3.1 8B's, Llama 3.2 1B's):
// RoPE scaling of kind llama3 and linear is read, the kinds not implemented are refused naming
// the kind, biases and tied embeddings are the config's options, and the family's defaults
// (LlamaConfig's) fill what a config leaves out.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "worker/model/drafter_config.h"
#include "worker/model/model_config.h"
#include "worker/model/model_registry.h"

namespace flashq {
namespace {

// meta-llama/Llama-3.1-8B-Instruct's config.json (transformers 4.43).
nlohmann::json llama3_1_8b_config() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})");
}

ErrorCode code_of(const nlohmann::json& config, std::string* message = nullptr) {
  try {
    parse_model_config(config, "dir/config.json");
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "config was accepted";
  return ErrorCode::kInternal;
}

TEST(LlamaConfig, ReadsTheRealLlama31Config) {
  const ModelConfig c = parse_model_config(llama3_1_8b_config(), "config.json");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // no head_dim key: hidden_size / num_attention_heads
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(c.rope_factor, 8.0);
  EXPECT_EQ(c.rope_low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_original_max_position, 8192);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));

  const RopeOptions rope = rope_options(c);
  EXPECT_EQ(rope.scaling, RopeScaling::kLlama3);
  EXPECT_EQ(rope.theta, 500000.0f);
  EXPECT_EQ(rope.factor, 8.0f);
  EXPECT_EQ(rope.original_max_position, 8192.0f);
}

TEST(LlamaConfig, ReadsTiedEmbeddingsAndHeadDimOfLlama32) {
  auto json = llama3_1_8b_config();
  json["hidden_size"] = 2048, json["num_hidden_layers"] = 16, json["head_dim"] = 64;
  json["tie_word_embeddings"] = true;
  json["rope_scaling"]["factor"] = 32.0;
  const ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_factor, 32.0);
}

TEST(LlamaConfig, ReadsLinearScalingUnderEitherKeyName) {
  for (const char* kind_key : {"rope_type", "type"}) {
    auto json = llama3_1_8b_config();
    json["rope_scaling"] = {{kind_key, "linear"}, {"factor", 2.0}};
    const ModelConfig c = parse_model_config(json, "config.json");
    EXPECT_EQ(c.rope_scaling, RopeScaling::kLinear) << kind_key;
    EXPECT_EQ(c.rope_factor, 2.0) << kind_key;
  }
  auto json = llama3_1_8b_config();
  json["rope_scaling"] = nullptr;
  EXPECT_EQ(parse_model_config(json, "config.json").rope_scaling, RopeScaling::kNone);
}

TEST(LlamaConfig, ReadsRopeParametersAsTransformers5WritesThem) {
  auto json = llama3_1_8b_config();
  json.erase("rope_theta");
  json["rope_parameters"] = json["rope_scaling"];
  json["rope_parameters"]["rope_theta"] = 500000.0;
  json.erase("rope_scaling");
  const ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(c.rope_factor, 8.0);
}

TEST(LlamaConfig, RefusesScalingKindsNotImplementedNamingTheKind) {
  for (const char* kind : {"dynamic", "proportional", "longrope"}) {
    auto json = llama3_1_8b_config();
    json["rope_scaling"] = {{"rope_type", kind}, {"factor", 4.0}};
    std::string message;
    EXPECT_EQ(code_of(json, &message), ErrorCode::kUnsupported) << kind;
    EXPECT_NE(message.find(kind), std::string::npos) << message;
    EXPECT_NE(message.find("rope_scaling"), std::string::npos) << message;
    EXPECT_NE(message.find("dir/config.json"), std::string::npos) << message;
  }
}

TEST(LlamaConfig, RefusesIncompleteOrInconsistentLlama3ScalingNamingTheKey) {
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    auto json = llama3_1_8b_config();
    json["rope_scaling"].erase(key);
    std::string message;
    EXPECT_EQ(code_of(json, &message), ErrorCode::kBadConfig) << key;
    EXPECT_NE(message.find(key), std::string::npos) << message;
  }
  auto json = llama3_1_8b_config();
  json["rope_scaling"]["high_freq_factor"] = 0.5;  // below low_freq_factor
  EXPECT_EQ(code_of(json), ErrorCode::kBadConfig);
  json = llama3_1_8b_config();
  json["rope_scaling"]["factor"] = 0.5;
  EXPECT_EQ(code_of(json), ErrorCode::kBadConfig);
  json = llama3_1_8b_config();
  json["rope_scaling"]["factor"] = 1e39;  // beyond a float, as the kernels hold it
  EXPECT_EQ(code_of(json), ErrorCode::kBadConfig);
  json = llama3_1_8b_config();
  json["rope_scaling"] = "llama3";
  EXPECT_EQ(code_of(json), ErrorCode::kBadConfig);
}

TEST(LlamaConfig, ReadsAttentionAndMlpBiases) {
  auto json = llama3_1_8b_config();
  json["attention_bias"] = true;
  ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  json["mlp_bias"] = true;
  c = parse_model_config(json, "config.json");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.mlp_bias);
}

// LlamaConfig's defaults: no num_key_value_heads is multi-head attention, no head_dim is
// hidden / heads, no rope_theta is 10000 (Llama 3 checkpoints name theirs), eps 1e-6.
TEST(LlamaConfig, TakesLlamaConfigDefaultsForAbsentKeys) {
  auto json = llama3_1_8b_config();
  for (const char* key : {"num_key_value_heads", "rope_theta", "rms_norm_eps", "max_position_embeddings",
                          "rope_scaling", "mlp_bias", "attention_bias", "tie_word_embeddings"}) {
    json.erase(key);
  }
  const ModelConfig c = parse_model_config(json, "config.json");
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kNone);
  EXPECT_FALSE(c.attention_bias || c.mlp_bias || c.tie_word_embeddings);
}

// The family comes from model_type, or from the architecture when a config names no model_type;
// Qwen3's config has no mlp_bias (Qwen3's MLP never has one), and its layers keep the q/k norm.
TEST(LlamaConfig, FamilyDecidesTheLayerOptions) {
  auto json = llama3_1_8b_config();
  json.erase("model_type");
  EXPECT_EQ(parse_model_config(json, "config.json").model_type, "llama");
  auto qwen = llama3_1_8b_config();
  qwen["model_type"] = "qwen3", qwen["architectures"] = {"Qwen3ForCausalLM"}, qwen["mlp_bias"] = true;
  const ModelConfig c = parse_model_config(qwen, "config.json");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.mlp_bias);
}

// A drafter for a Llama target (docs/dflash.md §3): its model_type's config class fills what it
// leaves out, its layers are z-lab's Qwen3 ones (q/k norm, no MLP biases), and its RoPE is what
// its own config names.
TEST(LlamaConfig, DrafterForALlamaTargetHasQwen3LayersWithItsOwnRope) {
  const ModelConfig target = parse_model_config(llama3_1_8b_config(), "target/config.json");
  nlohmann::json json = llama3_1_8b_config();
  json["architectures"] = {"DFlashDraftModel"};
  json["num_hidden_layers"] = 5;
  json["num_target_layers"] = 32;
  json["block_size"] = 10;
  json["mlp_bias"] = true;  // not read: Qwen3's MLP has none
  json["dflash_config"] = {{"mask_token_id", 128002}, {"target_layer_ids", {1, 8, 15, 22, 29}}};
  json["num_attention_heads"] = 64;  // head_dim absent: LlamaConfig's hidden / heads
  DrafterConfig drafter = parse_drafter_config(json, "drafter/config.json", target);
  EXPECT_TRUE(drafter.layers.qk_norm);
  EXPECT_FALSE(drafter.layers.mlp_bias);
  EXPECT_EQ(drafter.layers.head_dim, 64);
  EXPECT_EQ(drafter.layers.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(drafter.layers.rope_theta, 500000.0);
  EXPECT_EQ(drafter.block_size, 10);
  EXPECT_EQ(drafter.mask_token_id, 128002);
  EXPECT_EQ(drafter.target_layer_ids, (std::vector<int64_t>{1, 8, 15, 22, 29}));

  json["model_type"] = "qwen3_dflash";  // no family here: Qwen3Config's head_dim 128
  EXPECT_EQ(parse_drafter_config(json, "drafter/config.json", target).layers.head_dim, 128);
  json["model_type"] = "llama";
  json["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  try {
    parse_drafter_config(json, "drafter/config.json", target);
    ADD_FAILURE() << "a longrope-scaled drafter was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("longrope"), std::string::npos) << e.what();
  }
}

// Without target_layer_ids each drafter layer reads one target layer, spread over the target
// (docs/dflash.md §2.1); a drafter deeper than its target is refused before any list is built,
// so an absurd depth in a config cannot exhaust memory.
TEST(LlamaConfig, DrafterDeeperThanItsTargetIsRefused) {
  const ModelConfig target = parse_model_config(llama3_1_8b_config(), "target/config.json");
  nlohmann::json json = llama3_1_8b_config();
  json["architectures"] = {"DFlashDraftModel"};
  json["num_hidden_layers"] = 5;
  json["dflash_config"] = {{"mask_token_id", 128002}};
  EXPECT_EQ(parse_drafter_config(json, "drafter/config.json", target).target_layer_ids,
            (std::vector<int64_t>{1, 8, 15, 22, 29}));
  for (int64_t depth : {int64_t{33}, int64_t{1111111111111111}}) {
    json["num_hidden_layers"] = depth;
    try {
      parse_drafter_config(json, "drafter/config.json", target);
      ADD_FAILURE() << "a drafter of " << depth << " layers was accepted for a 32-layer target";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      EXPECT_NE(std::string(e.what()).find("num_hidden_layers"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace flashq
