#include "worker/model/model_config.h"

#include <algorithm>

#include "shared/json_file.h"
#include "worker/model/config_reader.h"

namespace flashq {
namespace {

// Reads eos_token_id as Hugging Face writes it: an int, a list of ints, or absent.
void collect_eos_ids(const ConfigReader& reader, std::vector<int32_t>& ids) {
  if (!reader.has("eos_token_id")) return;
  const nlohmann::json& value = reader.raw("eos_token_id");
  auto add = [&](const nlohmann::json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) reader.fail("eos_token_id", "must hold token ids, got " + value.dump());
    int32_t token = static_cast<int32_t>(id.get<int64_t>());
    if (std::find(ids.begin(), ids.end(), token) == ids.end()) ids.push_back(token);
  };
  if (value.is_array()) {
    for (const auto& id : value) add(id);
  } else {
    add(value);
  }
}

double read_rope_theta(const ConfigReader& reader, const std::string& label) {
  if (reader.has("rope_parameters")) {
    const nlohmann::json& params = reader.raw("rope_parameters");
    ConfigReader rope(params, label + " rope_parameters");
    std::string type = rope.string("rope_type", "default");
    reader.refuse_if(type != "default", "rope_parameters.rope_type", "'" + type + "'");
    return rope.positive_number("rope_theta");
  }
  return reader.positive_number("rope_theta", 10000.0);
}

void refuse_unimplemented(const ConfigReader& reader) {
  reader.refuse_if(reader.has("rope_scaling"), "rope_scaling", "(RoPE scaling)");
  reader.refuse_if(reader.boolean("use_sliding_window", false), "use_sliding_window", "true (sliding-window attention)");
  reader.refuse_if(reader.boolean("attention_bias", false), "attention_bias", "true");
  std::string act = reader.string("hidden_act", "silu");
  reader.refuse_if(act != "silu", "hidden_act", "'" + act + "'");
  if (reader.has("layer_types")) {
    for (const auto& type : reader.raw("layer_types")) {
      reader.refuse_if(type != "full_attention", "layer_types", "entry " + type.dump());
    }
  }
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& json, const std::string& label) {
  ConfigReader reader(json, label);
  ModelConfig config;
  if (reader.has("architectures")) {
    const nlohmann::json& archs = reader.raw("architectures");
    if (!archs.is_array() || archs.empty() || !archs[0].is_string()) reader.fail("architectures", "must be a list of names");
    config.architecture = archs[0].get<std::string>();
  }
  std::string model_type = reader.string("model_type", "qwen3");
  reader.refuse_if(model_type != "qwen3", "model_type", "'" + model_type + "' (only qwen3 is implemented)");
  refuse_unimplemented(reader);

  config.hidden_size = reader.positive_int("hidden_size");
  config.intermediate_size = reader.positive_int("intermediate_size");
  config.num_layers = reader.positive_int("num_hidden_layers");
  config.num_heads = reader.positive_int("num_attention_heads");
  // Hugging Face's Qwen3Config defaults: an absent num_key_value_heads is 32, a null one means
  // multi-head attention; an absent head_dim is 128 (never hidden_size / heads).
  config.num_kv_heads = json.contains("num_key_value_heads") ? reader.positive_int("num_key_value_heads", config.num_heads) : 32;
  config.head_dim = reader.positive_int("head_dim", 128);
  config.vocab_size = reader.positive_int("vocab_size");
  config.max_position_embeddings = reader.positive_int("max_position_embeddings", 32768);
  config.rms_norm_eps = static_cast<float>(reader.positive_number("rms_norm_eps", 1e-6));
  config.rope_theta = read_rope_theta(reader, label);
  config.tie_word_embeddings = reader.boolean("tie_word_embeddings", false);
  collect_eos_ids(reader, config.eos_token_ids);

  if (config.num_heads % config.num_kv_heads != 0) {
    reader.fail("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(config.num_heads) + ")");
  }
  if (config.head_dim % 2 != 0) reader.fail("head_dim", "must be even for rotary embeddings");
  if (config.vocab_size > INT32_MAX) reader.fail("vocab_size", "is too large");
  return config;
}

ModelConfig load_model_config(const std::filesystem::path& dir) {
  std::filesystem::path path = dir / "config.json";
  ModelConfig config = parse_model_config(read_json_file(path), path.string());
  std::filesystem::path generation = dir / "generation_config.json";
  if (std::filesystem::exists(generation)) {
    ConfigReader reader(read_json_file(generation), generation.string());
    collect_eos_ids(reader, config.eos_token_ids);
  }
  return config;
}

}  // namespace flashq
