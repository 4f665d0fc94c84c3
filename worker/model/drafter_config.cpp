#include "worker/model/drafter_config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "shared/json_file.h"
#include "worker/model/config_reader.h"
#include "worker/model/model_registry.h"

namespace flashq {

std::vector<int64_t> default_target_layer_ids(int64_t target_layers, int64_t count) {
  if (count == 1) return {target_layers / 2};  // as z-lab's code does; docs/dflash.md §2.1 covers K >= 2
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < count; ++i) {
    ids.push_back(static_cast<int64_t>(std::lround(
        1.0 + static_cast<double>(i) * static_cast<double>(target_layers - 4) / static_cast<double>(count - 1))));
  }
  return ids;
}

namespace {

// dflash_config's target_layer_ids, or one target layer per drafter layer spread over the
// target's (num_target_layers, else the target's own count).
std::vector<int64_t> read_target_layer_ids(const ConfigReader& reader, const ConfigReader& dflash_reader,
                                           const ModelConfig& target, int64_t drafter_layers) {
  std::vector<int64_t> ids;
  if (dflash_reader.has("target_layer_ids")) {
    for (const auto& id : dflash_reader.raw("target_layer_ids")) {
      if (!id.is_number_integer()) dflash_reader.fail("target_layer_ids", "must be a list of layer indices");
      ids.push_back(id.get<int64_t>());
    }
    return ids;
  }
  const int64_t target_layers = reader.positive_int("num_target_layers", target.num_layers);
  // One target layer per drafter layer: a drafter deeper than its target names no real layout
  // (and an absurd depth must be refused before the list is built).
  if (drafter_layers > target_layers) {
    reader.fail("num_hidden_layers", "is " + std::to_string(drafter_layers) +
                                         " but the drafter reads one target layer per layer and the target has " +
                                         std::to_string(target_layers));
  }
  return default_target_layer_ids(target_layers, drafter_layers);
}

// Published drafters have 1 to 8 layers; a config naming more than this is wrong.
constexpr int64_t kMostDrafterLayers = 4096;

// The keys of z-lab's attention pattern, read by read_layer_attention rather than by the layer
// stack's parser (which refuses sliding windows in a target).
constexpr const char* kAttentionPatternKeys[] = {"layer_types", "use_sliding_window", "sliding_window",
                                                 "max_window_layers", "is_causal"};

// z-lab's Qwen3DFlashAttention (dflash/model.py): a "sliding_attention" layer is causal and a
// "full_attention" one is not, unless a config-level is_causal says for every layer; a sliding
// layer's window is sliding_window, which Qwen3Config keeps only with use_sliding_window.
std::vector<DrafterLayerAttention> read_layer_attention(const ConfigReader& reader, int64_t layers) {
  const bool use_window = reader.boolean("use_sliding_window", false);
  std::vector<bool> sliding(static_cast<size_t>(layers), false);
  if (reader.has("layer_types")) {
    const nlohmann::json& types = reader.raw("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
      reader.fail("layer_types", "must list one type per layer (" + std::to_string(layers) + ")");
    }
    for (size_t i = 0; i < types.size(); ++i) {
      reader.refuse_if(types[i] != "full_attention" && types[i] != "sliding_attention", "layer_types",
                       "entry " + types[i].dump() + " (implemented: full_attention, sliding_attention)");
      sliding[i] = types[i] == "sliding_attention";
    }
  } else {
    // Qwen3Config would derive the list from max_window_layers; no published drafter relies on it.
    reader.refuse_if(use_window, "use_sliding_window", "true without a layer_types list");
  }
  const int64_t window = use_window ? reader.positive_int("sliding_window") : 0;
  std::optional<bool> all_causal;
  if (reader.has("is_causal")) {
    if (!reader.raw("is_causal").is_boolean()) reader.fail("is_causal", "must be true or false");
    all_causal = reader.raw("is_causal").get<bool>();
  }
  std::vector<DrafterLayerAttention> attention;
  for (bool is_sliding : sliding) {
    attention.push_back({.causal = all_causal.value_or(is_sliding), .window = is_sliding ? window : 0});
  }
  return attention;
}

// z-lab's _draft_value: a key of dflash_config, else the same key at the top level.
const ConfigReader& holder_of(const std::string& key, const ConfigReader& dflash_reader, const ConfigReader& reader) {
  return dflash_reader.has(key) ? dflash_reader : reader;
}

// DFlash2's four required keys (z-lab's GroupedDynamicCausalConv and CandidateSelector).
DFlash2Options read_dflash2_options(const ConfigReader& reader, const ConfigReader& dflash_reader,
                                    const ModelConfig& layers) {
  auto required = [&](const char* key) {
    const ConfigReader& holder = holder_of(key, dflash_reader, reader);
    if (!holder.has(key)) dflash_reader.fail(key, "is missing (a DFlash2 drafter needs it)");
    return holder.positive_int(key);
  };
  DFlash2Options options{.conv_kernel_size = required("conv_kernel_size"),
                         .conv_group_size = required("conv_group_size"),
                         .selector_rank = required("selector_rank"),
                         .selector_top_k = required("selector_top_k")};
  if (layers.hidden_size % options.conv_group_size != 0) {
    dflash_reader.fail("conv_group_size", "must divide hidden_size (" + std::to_string(layers.hidden_size) + ")");
  }
  if (options.selector_top_k > layers.vocab_size) {
    dflash_reader.fail("selector_top_k", "exceeds the vocabulary (" + std::to_string(layers.vocab_size) + ")");
  }
  return options;
}

// input_embedding_scale, output_multiplier, final_logit_softcapping as z-lab reads them.
void read_logit_options(const ConfigReader& reader, const ConfigReader& dflash_reader, DrafterConfig& config) {
  auto number = [&](const char* key, double fallback) {
    const ConfigReader& holder = holder_of(key, dflash_reader, reader);
    if (!holder.has(key)) return fallback;
    if (!holder.raw(key).is_number()) holder.fail(key, "must be a number");
    return holder.raw(key).get<double>();
  };
  config.input_embedding_scale = number("input_embedding_scale", 1.0);
  config.output_multiplier = number("output_multiplier", 1.0);
  config.final_logit_softcapping = std::max(0.0, number("final_logit_softcapping", 0.0));  // <= 0: none
  // Scaling the block's embedding rows has no backend op yet; no published drafter sets it.
  holder_of("input_embedding_scale", dflash_reader, reader)
      .refuse_if(config.input_embedding_scale != 1.0, "input_embedding_scale",
                 std::to_string(config.input_embedding_scale) + " (implemented: 1)");
  if (!(config.output_multiplier > 0.0) || !std::isfinite(config.output_multiplier)) {
    dflash_reader.fail("output_multiplier", "must be positive (a draft is the order of the logits)");
  }
  if (!std::isfinite(config.final_logit_softcapping)) dflash_reader.fail("final_logit_softcapping", "must be finite");
}

}  // namespace

float drafter_logit(const DrafterConfig& config, float head_logit) {
  double logit = static_cast<double>(head_logit) * config.output_multiplier;
  const double cap = config.final_logit_softcapping;
  if (cap > 0.0) logit = std::tanh(logit / cap) * cap;
  return static_cast<float>(logit);
}

DrafterConfig parse_drafter_config(const nlohmann::json& json, const std::string& label, const ModelConfig& target) {
  ConfigReader reader(json, label);

  // Architecture first: a drafter we do not implement must not half-load.
  std::string architecture;
  if (reader.has("architectures") && reader.raw("architectures").is_array() && !reader.raw("architectures").empty()) {
    architecture = reader.raw("architectures")[0].is_string() ? reader.raw("architectures")[0].get<std::string>() : "";
  }
  if (architecture != "DFlashDraftModel" && architecture != "DFlash2DraftModel") {
    reader.fail("architectures", "must be [\"DFlashDraftModel\"] or [\"DFlash2DraftModel\"] for a DFlash drafter");
  }

  const nlohmann::json dflash = reader.has("dflash_config") ? reader.raw("dflash_config") : nlohmann::json::object();
  ConfigReader dflash_reader(dflash, label + " dflash_config");

  DrafterConfig config;
  // The layer stack is z-lab's DFlashDraftModel's whatever the target's family: Qwen3 layers (the
  // q/k norm, no MLP biases) with the attention_bias, rope_theta and rope_scaling its own config
  // names (docs/dflash.md §3). model_type names the config class whose defaults fill the keys it
  // leaves out (LlamaConfig's head_dim is hidden / heads, Qwen3Config's 128), never the layer
  // type; a model_type of no family here is read as Qwen3Config, the class z-lab's code declares.
  // A model_type whose family has keys of its own (experts, sinks: qwen3_moe, gpt_oss, as some
  // copies of z-lab's gpt-oss drafter config say) is read as Qwen3Config too, keeping only that
  // family's head_dim default.
  nlohmann::json layer_json = json;
  for (const char* key : kAttentionPatternKeys) layer_json.erase(key);
  const nlohmann::json& model_type = json.contains("model_type") ? json["model_type"] : nlohmann::json();
  const ModelFamily* family = model_type.is_string() ? find_model_family(model_type.get<std::string>(), "") : nullptr;
  if (family == nullptr || family->read_family_options != nullptr) {
    if (family != nullptr && !json.contains("head_dim") && family->config_defaults.head_dim > 0) {
      layer_json["head_dim"] = family->config_defaults.head_dim;
    }
    layer_json["model_type"] = "qwen3";
  }
  config.layers = parse_model_config(layer_json, label);
  config.layers.qk_norm = true;
  config.layers.mlp_bias = false;
  config.layers.moe = MoeConfig{};  // dense layers, whatever experts the target has
  config.layers.attention_sinks = false;
  config.block_size = dflash_reader.has("block_size") ? dflash_reader.positive_int("block_size")
                                                      : reader.positive_int("block_size", 16);
  if (!dflash_reader.has("mask_token_id")) dflash_reader.fail("mask_token_id", "is missing");
  const int64_t mask = dflash_reader.positive_int("mask_token_id");
  config.mask_token_id = static_cast<int32_t>(mask);

  config.target_layer_ids = read_target_layer_ids(reader, dflash_reader, target, config.layers.num_layers);
  // One entry per layer is built next: an absurd depth is refused first, not allocated.
  if (config.layers.num_layers > kMostDrafterLayers) {
    reader.fail("num_hidden_layers", "is " + std::to_string(config.layers.num_layers) +
                                         ", beyond any drafter (at most " + std::to_string(kMostDrafterLayers) + ")");
  }
  config.layer_attention = read_layer_attention(reader, config.layers.num_layers);
  read_logit_options(reader, dflash_reader, config);
  if (architecture == "DFlash2DraftModel") config.dflash2 = read_dflash2_options(reader, dflash_reader, config.layers);

  if (config.block_size < 2) reader.fail("block_size", "must be at least 2");
  if (config.target_layer_ids.empty()) dflash_reader.fail("target_layer_ids", "must not be empty");
  for (int64_t id : config.target_layer_ids) {
    if (id < 0 || id >= target.num_layers) {
      dflash_reader.fail("target_layer_ids", "holds layer " + std::to_string(id) + " but the target has " +
                                                 std::to_string(target.num_layers) + " layers");
    }
  }
  if (config.layers.vocab_size != target.vocab_size) {
    reader.fail("vocab_size", "is " + std::to_string(config.layers.vocab_size) + " but the target's is " +
                                  std::to_string(target.vocab_size));
  }
  if (config.layers.hidden_size != target.hidden_size) {
    reader.fail("hidden_size", "must equal the target's " + std::to_string(target.hidden_size) +
                                   " (the drafter embeds with the target's table)");
  }
  if (mask >= target.vocab_size) {
    dflash_reader.fail("mask_token_id",
                       "is outside the target's embedding of " + std::to_string(target.vocab_size) + " rows");
  }
  return config;
}

DrafterConfig load_drafter_config(const std::filesystem::path& dir, const ModelConfig& target) {
  const std::filesystem::path path = dir / "config.json";
  return parse_drafter_config(read_json_file(path), path.string(), target);
}

}  // namespace flashq
