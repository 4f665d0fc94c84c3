// The hyper-parameters of a z-lab DFlash drafter directory (docs/dflash.md §3): a Qwen3-style layer
// stack (with the attention biases and RoPE scaling its config names) plus the block size, the
// MASK token and the target layers whose hidden states it reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/model/model_config.h"

namespace flashq {

// Which keys a drafter layer's block rows see (docs/dflash.md §2.5). Block row j sits at position
// start + j; keys are the context's rows before the block, then the block's own.
struct DrafterLayerAttention {
  bool causal = false;  // row j sees positions <= start + j only; else the whole block
  int64_t window = 0;   // > 0: only positions less than `window` away (behind, and ahead if not causal)
};

struct DrafterConfig {
  ModelConfig layers;  // hidden size, heads, head_dim, intermediate size, eps, rope theta, ...
  int64_t block_size = 16;
  int32_t mask_token_id = 0;
  std::vector<int64_t> target_layer_ids;               // 0-based target layers, in concatenation order
  std::vector<DrafterLayerAttention> layer_attention;  // one per layer
};

// docs/dflash.md §2.1: K layers evenly spread from layer 1 to layer L-3.
std::vector<int64_t> default_target_layer_ids(int64_t target_layers, int64_t count);

// Parses a drafter's config.json object and checks it against the target it will serve; `label`
// (the file path) prefixes every error message. Errors as load_drafter_config's.
DrafterConfig parse_drafter_config(const nlohmann::json& json, const std::string& label, const ModelConfig& target);

// Reads dir/config.json and checks it against the target it will serve. Refuses (kUnsupported,
// naming the key) what we do not implement; kBadConfig for anything inconsistent.
DrafterConfig load_drafter_config(const std::filesystem::path& dir, const ModelConfig& target);

}  // namespace flashq
