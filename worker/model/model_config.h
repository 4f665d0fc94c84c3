// The hyper-parameters of a Qwen3 model directory, read from config.json (and the eos ids
// from generation_config.json) exactly as Hugging Face writes them. Anything that changes the
// computation and that we do not implement is refused with a message naming the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashq {

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. Qwen3ForCausalLM
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // read from config.json, never derived from hidden_size
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 1e6;
  bool tie_word_embeddings = false;
  std::vector<int32_t> eos_token_ids;  // config.json and generation_config.json, deduplicated
};

// Parses a config.json object; `label` (the file path) prefixes every error message.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& label);

// Reads dir/config.json and, when present, dir/generation_config.json.
ModelConfig load_model_config(const std::filesystem::path& dir);

}  // namespace flashq
