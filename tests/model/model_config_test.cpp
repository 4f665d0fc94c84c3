// config.json parsing: what Hugging Face writes loads; what we do not implement (a family or a
// feature) is refused naming the key; broken files name the file and the problem.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tests/support/temp_dir.h"
#include "worker/model/model_config.h"
#include "worker/model/model_registry.h"

namespace flashq {
namespace {

nlohmann::json qwen3_0_6b_config() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
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

TEST(ModelConfig, ReadsTheRealQwen3Config) {
  ModelConfig c = parse_model_config(qwen3_0_6b_config(), "config.json");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
}

TEST(ModelConfig, ReadsHeadDimInsteadOfDerivingIt) {
  auto json = qwen3_0_6b_config();
  json["head_dim"] = 96;  // hidden / heads would be 64
  EXPECT_EQ(parse_model_config(json, "config.json").head_dim, 96);
}

TEST(ModelConfig, ReadsRopeThetaFromRopeParameters) {
  auto json = qwen3_0_6b_config();
  json.erase("rope_theta");
  json["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  EXPECT_EQ(parse_model_config(json, "config.json").rope_theta, 5e5);
}

TEST(ModelConfig, RefusesUnimplementedFeaturesNamingTheKey) {
  struct Case {
    const char* key;
    nlohmann::json value;
  };
  for (const Case& c : {Case{"rope_scaling", {{"rope_type", "longrope"}, {"factor", 4.0}}},
                        Case{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}},
                        Case{"use_sliding_window", true}, Case{"hidden_act", "gelu"}, Case{"model_type", "mistral"},
                        Case{"layer_types", {"sliding_attention", "full_attention"}}}) {
    auto json = qwen3_0_6b_config();
    json[c.key] = c.value;
    std::string message;
    EXPECT_EQ(code_of(json, &message), ErrorCode::kUnsupported) << c.key;
    EXPECT_NE(message.find(c.key), std::string::npos) << message;
    EXPECT_NE(message.find("dir/config.json"), std::string::npos) << message;
  }
}

// The family comes from model_type (model_registry.h): one this build lacks is refused naming
// those it has; without model_type, architectures names it, and a config naming neither is read
// as the first family.
TEST(ModelConfig, FindsTheFamilyAndRefusesAnUnknownOneNamingTheImplemented) {
  auto json = qwen3_0_6b_config();
  json["model_type"] = "mistral";
  std::string message;
  EXPECT_EQ(code_of(json, &message), ErrorCode::kUnsupported);
  EXPECT_NE(message.find("mistral"), std::string::npos) << message;
  EXPECT_NE(message.find(supported_model_types()), std::string::npos) << message;
  EXPECT_EQ(supported_model_types(), "qwen3, llama, qwen3_moe, gpt_oss, qwen3_5, qwen3_5_moe, qwen3_next");

  EXPECT_EQ(parse_model_config(qwen3_0_6b_config(), "config.json").model_type, "qwen3");
  json = qwen3_0_6b_config();
  json.erase("model_type");
  EXPECT_EQ(parse_model_config(json, "config.json").model_type, "qwen3");
  json.erase("architectures");
  EXPECT_EQ(parse_model_config(json, "config.json").model_type, "qwen3");
  EXPECT_EQ(find_model_family("", "Qwen3ForCausalLM"), &model_families()[0]);
  EXPECT_EQ(find_model_family("mistral", "Qwen3ForCausalLM"), nullptr);
}

TEST(ModelConfig, RejectsMissingAndMistypedKeysNamingThem) {
  for (const char* key : {"hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size"}) {
    auto json = qwen3_0_6b_config();
    json.erase(key);
    std::string message;
    EXPECT_EQ(code_of(json, &message), ErrorCode::kBadConfig) << key;
    EXPECT_NE(message.find(key), std::string::npos) << message;
  }
  auto json = qwen3_0_6b_config();
  json["hidden_size"] = "1024";
  EXPECT_EQ(code_of(json), ErrorCode::kBadConfig);
  json = qwen3_0_6b_config();
  json["num_key_value_heads"] = 5;  // does not divide 16
  EXPECT_EQ(code_of(json), ErrorCode::kBadConfig);
  json = qwen3_0_6b_config();
  json["rms_norm_eps"] = -1;
  EXPECT_EQ(code_of(json), ErrorCode::kBadConfig);
  EXPECT_EQ(code_of(nlohmann::json::array()), ErrorCode::kBadConfig);
}

// Values the JSON holds but the model's types (a float eps, int32 token ids) cannot.
TEST(ModelConfig, RefusesValuesTheModelsTypesCannotHold) {
  for (double eps : {1e-96, 1e300}) {
    nlohmann::json config = qwen3_0_6b_config();
    config["rms_norm_eps"] = eps;
    std::string message;
    EXPECT_EQ(code_of(config, &message), ErrorCode::kBadConfig) << eps;
    EXPECT_NE(message.find("rms_norm_eps"), std::string::npos) << message;
  }
  nlohmann::json config = qwen3_0_6b_config();
  config["eos_token_id"] = nlohmann::json::array({2, int64_t{1} << 31});
  std::string message;
  EXPECT_EQ(code_of(config, &message), ErrorCode::kBadConfig);
  EXPECT_NE(message.find("eos_token_id"), std::string::npos) << message;
}

TEST(ModelConfig, TakesEosIdsFromGenerationConfigToo) {
  flashq::testing::TempDir dir;
  write_text_file(dir / "config.json", qwen3_0_6b_config().dump());
  write_text_file(dir / "generation_config.json", R"({"eos_token_id": [151645, 151643]})");
  EXPECT_EQ(load_model_config(dir.path()).eos_token_ids, (std::vector<int32_t>{151645, 151643}));
}

TEST(ModelConfig, BrokenJsonNamesTheFile) {
  flashq::testing::TempDir dir;
  write_text_file(dir / "config.json", "{\"hidden_size\": 10,");
  try {
    load_model_config(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  // A number JSON cannot hold in a double, or nesting that recursion over the value would
  // overflow the stack with, is refused as the file's error.
  for (const std::string& text : {std::string("{\"rope_theta\": 1e999}"),
                                  "{\"hidden_size\": " + std::string(200000, '[') + std::string(200000, ']') + "}"}) {
    write_text_file(dir / "config.json", text);
    try {
      load_model_config(dir.path());
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    }
  }
  flashq::testing::TempDir empty;
  try {
    load_model_config(empty.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

}  // namespace
}  // namespace flashq
