// The target-model families this build implements, and the one place that turns a model
// directory into the TargetModel its config.json describes. A family is data: its config.json
// names and defaults and the layer options it turns on (qwen3.h, llama.h, qwen3_moe.h,
// gpt_oss.h, qwen3_5.h, qwen3_5_moe.h, qwen3_next.h); one decoder model (decoder_model.h) runs
// every family. Adding one is its file pair
// and one line in model_registry.cpp.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/config_reader.h"
#include "worker/model/model_config.h"
#include "worker/model/target_model.h"

namespace flashq {

struct ModelFamily {
  std::string model_type;                       // config.json's model_type, e.g. qwen3
  std::vector<std::string> model_type_aliases;  // other model_types of the same family (qwen3_5_text)
  std::vector<std::string> architectures;       // config.json's architectures[0], e.g. Qwen3ForCausalLM
  ModelConfigDefaults config_defaults;          // for the keys its config.json may leave out
  bool qk_norm = false;                         // its layers norm each q and k head (Qwen3)
  bool reads_mlp_bias = false;                  // config.json's mlp_bias applies (LlamaConfig has it, Qwen3Config not)
  bool reads_layer_types = false;               // layer_types may name sliding_attention layers (gpt-oss)
  bool linear_attention = false;                // layer_types may name linear_attention layers (Qwen3.5)
  // The keys only this family has (its experts, say), read into `config` after the common ones;
  // null when it has none.
  void (*read_family_options)(const ConfigReader& reader, ModelConfig& config) = nullptr;
};

// Every family, in registry order.
std::span<const ModelFamily> model_families();

// The family named by `model_type`; when that is empty, by `architecture`, else the first
// family (a config.json that names neither). Null when `model_type` names none of them.
const ModelFamily* find_model_family(const std::string& model_type, const std::string& architecture);

// The model_types implemented, for messages: "qwen3, llama".
std::string supported_model_types();

// Loads dir/config.json (and generation_config.json, the family's defaults applied) and the
// safetensors weights into the decoder model. Every error is typed and names the file: kUnsupported for a family or a
// feature not implemented, kBadConfig, kBadCheckpoint, kNotFound.
std::unique_ptr<TargetModel> load_target_model(const std::filesystem::path& dir, Backend& backend);

}  // namespace flashq
