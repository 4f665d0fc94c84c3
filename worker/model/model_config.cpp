#include "worker/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "shared/json_file.h"
#include "worker/model/config_reader.h"
#include "worker/model/model_registry.h"

namespace flashq {
namespace {

// Reads eos_token_id as Hugging Face writes it: an int, a list of ints, or absent.
void collect_eos_ids(const ConfigReader& reader, std::vector<int32_t>& ids) {
  if (!reader.has("eos_token_id")) return;
  const nlohmann::json& value = reader.raw("eos_token_id");
  auto add = [&](const nlohmann::json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      reader.fail("eos_token_id", "must hold token ids, got " + value.dump());
    }
    int32_t token = static_cast<int32_t>(id.get<int64_t>());
    if (std::find(ids.begin(), ids.end(), token) == ids.end()) ids.push_back(token);
  };
  if (value.is_array()) {
    for (const auto& id : value) add(id);
  } else {
    add(value);
  }
}

// yarn's keys as _compute_yarn_parameters reads them (the factor already read): beta_fast and
// beta_slow default to 32 and 1 (also when 0), the original context to max_position_embeddings,
// truncate to true; the attention factor is the one given, else from mscale and mscale_all_dim
// when both are set, else 0.1 ln(factor) + 1 (1 for a factor of 1).
template <typename FloatNumber>
void read_yarn(const ConfigReader& rope, const FloatNumber& float_number, ModelConfig& config) {
  // A key that is absent, null or 0 takes its default, as the published `or` does.
  auto given = [&rope](const char* name) {
    return rope.has(name) && !(rope.raw(name).is_number() && rope.raw(name).get<double>() == 0.0);
  };
  config.rope_scaling = RopeScaling::kYarn;
  config.rope_beta_fast = given("beta_fast") ? float_number("beta_fast") : 32.0;
  config.rope_beta_slow = given("beta_slow") ? float_number("beta_slow") : 1.0;
  if (config.rope_beta_fast < config.rope_beta_slow) rope.fail("beta_fast", "must be at least beta_slow");
  if (given("original_max_position_embeddings")) {
    config.rope_original_max_position = rope.positive_int("original_max_position_embeddings");
  } else if (config.max_position_embeddings > 0) {
    config.rope_original_max_position = config.max_position_embeddings;
  } else {
    rope.fail("original_max_position_embeddings", "is needed by yarn RoPE when max_position_embeddings is absent");
  }
  config.rope_truncate = rope.boolean("truncate", true);
  const auto mscale = [&](double m) {
    return config.rope_factor <= 1.0 ? 1.0 : 0.1 * m * std::log(config.rope_factor) + 1.0;
  };
  if (given("attention_factor")) {
    config.rope_attention_factor = float_number("attention_factor");
  } else if (given("mscale") && given("mscale_all_dim")) {
    config.rope_attention_factor = mscale(float_number("mscale")) / mscale(float_number("mscale_all_dim"));
  } else {
    config.rope_attention_factor = mscale(1.0);
  }
}

// The scaling of one rope_scaling / rope_parameters object, as transformers' rope_type names it
// (older configs say `type`): default, linear, llama3 and yarn with the keys their functions in
// modeling_rope_utils.py require; any other kind is refused naming it.
void read_rope_scaling(const ConfigReader& rope, const std::string& key, ModelConfig& config) {
  const std::string kind = rope.has("rope_type") ? rope.string("rope_type", "") : rope.string("type", "default");
  if (kind == "default") return;
  rope.refuse_if(kind != "linear" && kind != "llama3" && kind != "yarn", "rope_type",
                 "'" + kind + "' (" + key + "; implemented: default, linear, llama3, yarn)");
  // The kernels hold these as floats (RopeOptions): a value a float cannot hold is refused.
  auto float_number = [&rope](const char* name) {
    const double x = rope.positive_number(name);
    if (x > std::numeric_limits<float>::max()) rope.fail(name, "must fit a float, got " + rope.raw(name).dump());
    return x;
  };
  config.rope_factor = float_number("factor");
  if (config.rope_factor < 1.0) rope.fail("factor", "must be at least 1");
  if (kind == "linear") {
    config.rope_scaling = RopeScaling::kLinear;
    return;
  }
  if (kind == "yarn") {
    read_yarn(rope, float_number, config);
    return;
  }
  config.rope_scaling = RopeScaling::kLlama3;
  config.rope_low_freq_factor = float_number("low_freq_factor");
  config.rope_high_freq_factor = float_number("high_freq_factor");
  config.rope_original_max_position = rope.positive_int("original_max_position_embeddings");
  if (config.rope_high_freq_factor <= config.rope_low_freq_factor) {
    rope.fail("high_freq_factor", "must be above low_freq_factor");
  }
}

// rope_theta and the scaling: transformers 5 writes both into rope_parameters, earlier versions
// rope_theta at the top and rope_scaling (null when unscaled) beside it.
void read_rope(const ConfigReader& reader, const std::string& label, double theta_fallback, ModelConfig& config) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (reader.has(key) && !reader.raw(key).is_object()) reader.fail(key, "must be an object");
  }
  if (reader.has("rope_parameters")) {
    ConfigReader rope(reader.raw("rope_parameters"), label + " rope_parameters");
    config.rope_theta = rope.positive_number("rope_theta");
    read_rope_scaling(rope, "rope_parameters", config);
    return;
  }
  config.rope_theta = reader.positive_number("rope_theta", theta_fallback);
  if (reader.has("rope_scaling")) {
    read_rope_scaling(ConfigReader(reader.raw("rope_scaling"), label + " rope_scaling"), "rope_scaling", config);
  }
}

// The family config.json names: by model_type, or by architecture when it names no model_type.
const ModelFamily& read_family(const ConfigReader& reader, const std::string& architecture) {
  const std::string model_type = reader.string("model_type", "");
  const ModelFamily* family = find_model_family(model_type, architecture);
  reader.refuse_if(family == nullptr, "model_type",
                   "'" + model_type + "' (implemented: " + supported_model_types() + ")");
  return *family;
}

// Keys no family here implements yet. When one does, its refusal becomes that family's option
// (a ModelConfig field the family reads, and an option of the backend op that applies it).
void refuse_unimplemented(const ConfigReader& reader, const ModelFamily& family) {
  reader.refuse_if(reader.boolean("use_sliding_window", false), "use_sliding_window", "true (sliding-window attention)");
  std::string act = reader.string("hidden_act", "silu");
  reader.refuse_if(act != "silu", "hidden_act", "'" + act + "'");
  if (reader.has("layer_types") && !family.reads_layer_types && !family.linear_attention) {
    if (!reader.raw("layer_types").is_array()) reader.fail("layer_types", "must be a list");
    for (const auto& type : reader.raw("layer_types")) {
      reader.refuse_if(type != "full_attention", "layer_types", "entry " + type.dump());
    }
  }
}

// layer_types of a family that has sliding or linear-attention layers: one entry per layer, each
// full_attention or the kind the family has (an absent list is the family's own default, read by
// the family).
void read_layer_types(const ConfigReader& reader, const ModelFamily& family, ModelConfig& config) {
  if (!reader.has("layer_types")) return;
  const nlohmann::json& types = reader.raw("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != config.num_layers) {
    reader.fail("layer_types", "must list one type per layer (" + std::to_string(config.num_layers) + ")");
  }
  config.sliding_layers.clear();
  config.linear_attention.layers.clear();
  const char* other = family.linear_attention ? "linear_attention" : "sliding_attention";
  for (const auto& type : types) {
    reader.refuse_if(type != "full_attention" && type != other, "layer_types", "entry " + type.dump());
    (family.linear_attention ? config.linear_attention.layers : config.sliding_layers).push_back(type == other);
  }
}

// A multimodal checkpoint's config (Qwen3.5's ...ForConditionalGeneration) holds the language
// model's keys in text_config; the composite keeps a few of them at the top level, which fill in
// the ones text_config leaves out. Other configs are read as they are.
nlohmann::json language_model_config(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("text_config") || !json["text_config"].is_object()) return json;
  nlohmann::json text = json["text_config"];
  for (const char* key : {"tie_word_embeddings", "eos_token_id", "architectures"}) {
    if (!text.contains(key) && json.contains(key)) text[key] = json[key];
  }
  if (!text.contains("model_type") && json.contains("model_type")) text["model_type"] = json["model_type"];
  return text;
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& whole, const std::string& file_label) {
  const nlohmann::json json = language_model_config(whole);
  const std::string label = json != whole ? file_label + " text_config" : file_label;
  ConfigReader reader(json, label);
  ModelConfig config;
  if (reader.has("architectures")) {
    const nlohmann::json& archs = reader.raw("architectures");
    if (!archs.is_array() || archs.empty() || !archs[0].is_string()) reader.fail("architectures", "must be a list of names");
    config.architecture = archs[0].get<std::string>();
  }
  const ModelFamily& family = read_family(reader, config.architecture);
  config.model_type = family.model_type;
  refuse_unimplemented(reader, family);

  const ModelConfigDefaults& defaults = family.config_defaults;
  config.hidden_size = reader.positive_int("hidden_size");
  config.intermediate_size = defaults.intermediate_size > 0
                                 ? reader.positive_int("intermediate_size", defaults.intermediate_size)
                                 : reader.positive_int("intermediate_size");
  config.num_layers = reader.positive_int("num_hidden_layers");
  config.num_heads = reader.positive_int("num_attention_heads");
  // An absent num_key_value_heads takes the family's default, a null one means multi-head
  // attention; an absent head_dim the family's default, which need not be hidden / heads.
  config.num_kv_heads = json.contains("num_key_value_heads")
                            ? reader.positive_int("num_key_value_heads", config.num_heads)
                            : (defaults.num_kv_heads > 0 ? defaults.num_kv_heads : config.num_heads);
  config.head_dim = reader.positive_int(
      "head_dim", defaults.head_dim > 0 ? defaults.head_dim : config.hidden_size / config.num_heads);
  config.vocab_size = reader.positive_int("vocab_size");
  config.max_position_embeddings = reader.positive_int("max_position_embeddings", defaults.max_position_embeddings);
  // Kept as a float by the kernels: a value a float cannot hold would become 0 (a division by zero
  // in RMSNorm) or be undefined behaviour to convert.
  const double eps = reader.positive_number("rms_norm_eps", defaults.rms_norm_eps);
  if (eps < std::numeric_limits<float>::min() || eps > std::numeric_limits<float>::max()) {
    reader.fail("rms_norm_eps", "must fit a float (1.2e-38 to 3.4e38), got " + reader.raw("rms_norm_eps").dump());
  }
  config.rms_norm_eps = static_cast<float>(eps);
  read_rope(reader, label, defaults.rope_theta, config);
  config.qk_norm = family.qk_norm;
  config.attention_bias = reader.boolean("attention_bias", defaults.attention_bias);
  config.mlp_bias = family.reads_mlp_bias && reader.boolean("mlp_bias", false);
  config.tie_word_embeddings = reader.boolean("tie_word_embeddings", false);
  collect_eos_ids(reader, config.eos_token_ids);
  if (family.read_family_options != nullptr) family.read_family_options(reader, config);
  if (family.reads_layer_types || family.linear_attention) read_layer_types(reader, family, config);

  const std::vector<bool>& linear = config.linear_attention.layers;
  if (!linear.empty() && std::all_of(linear.begin(), linear.end(), [](bool l) { return l; })) {
    reader.fail("layer_types", "must name at least one full_attention layer");
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    reader.fail("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(config.num_heads) + ")");
  }
  if (config.head_dim % 2 != 0) reader.fail("head_dim", "must be even for rotary embeddings");
  if (config.vocab_size > INT32_MAX) reader.fail("vocab_size", "is too large");
  return config;
}

int64_t attention_window(const ModelConfig& config, int64_t layer) {
  const auto index = static_cast<size_t>(layer);
  return index < config.sliding_layers.size() && config.sliding_layers[index] ? config.sliding_window : 0;
}

std::vector<int64_t> attention_layers(const ModelConfig& config) {
  std::vector<int64_t> layers;
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    if (!config.linear_attention.linear_layer(layer)) layers.push_back(layer);
  }
  return layers;
}

std::vector<int64_t> attention_windows(const ModelConfig& config) {
  std::vector<int64_t> windows;
  for (int64_t layer : attention_layers(config)) windows.push_back(attention_window(config, layer));
  if (std::all_of(windows.begin(), windows.end(), [](int64_t w) { return w == 0; })) windows.clear();
  return windows;
}

bool MoeConfig::sparse_layer(int64_t layer) const {
  return num_experts > 0 && (layer + 1) % sparse_step == 0 &&
         std::find(dense_layers.begin(), dense_layers.end(), layer) == dense_layers.end();
}

RopeOptions rope_options(const ModelConfig& c) {
  return {
      .theta = static_cast<float>(c.rope_theta),
      .scaling = c.rope_scaling,
      .factor = static_cast<float>(c.rope_factor),
      .low_freq_factor = static_cast<float>(c.rope_low_freq_factor),
      .high_freq_factor = static_cast<float>(c.rope_high_freq_factor),
      .original_max_position = static_cast<float>(c.rope_original_max_position),
      .beta_fast = static_cast<float>(c.rope_beta_fast),
      .beta_slow = static_cast<float>(c.rope_beta_slow),
      .truncate = c.rope_truncate,
      .attention_factor = c.rope_scaling == RopeScaling::kYarn ? static_cast<float>(c.rope_attention_factor) : 0.0f,
      .rotary_dims = static_cast<int32_t>(c.rotary_dims)};
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
