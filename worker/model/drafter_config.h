// The hyper-parameters of a z-lab DFlash drafter directory (docs/dflash.md §3): a Qwen3-style layer
// stack (with the attention biases and RoPE scaling its config names) plus the block size, the
// MASK token and the target layers whose hidden states it reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
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

// What DFlash2 adds to the layers and the draft (docs/dflash.md §7): a grouped two-tap dynamic
// causal convolution around each sublayer, and the candidate selector over the drafter's logits.
struct DFlash2Options {
  int64_t conv_kernel_size = 0;  // taps: row t reads rows t, t-1, ..., never before its block
  int64_t conv_group_size = 0;   // channels sharing one dynamic tap weight
  int64_t selector_rank = 0;     // the low-rank codebooks' width
  int64_t selector_top_k = 0;    // candidates per draft position
};

struct DrafterConfig {
  ModelConfig layers;  // hidden size, heads, head_dim, intermediate size, eps, rope theta, ...
  int64_t block_size = 16;
  int32_t mask_token_id = 0;
  std::vector<int64_t> target_layer_ids;               // 0-based target layers, in concatenation order
  std::vector<DrafterLayerAttention> layer_attention;  // one per layer
  std::optional<DFlash2Options> dflash2;               // architectures ["DFlash2DraftModel"]
  // z-lab's compute_logits and input embedding (both architectures): block rows embedded times
  // input_embedding_scale (only 1 is implemented: others are refused); logits times
  // output_multiplier, then cap * tanh(logits / cap) when final_logit_softcapping (cap) > 0. The
  // multiplier is positive: both maps keep the order.
  double input_embedding_scale = 1.0;
  double output_multiplier = 1.0;
  double final_logit_softcapping = 0.0;
};

// The drafter's logits as z-lab's compute_logits makes them from the LM head's: multiplied and
// soft-capped as `config` says.
float drafter_logit(const DrafterConfig& config, float head_logit);

// docs/dflash.md §2.1: K layers evenly spread from layer 1 to layer L-3.
std::vector<int64_t> default_target_layer_ids(int64_t target_layers, int64_t count);

// Parses a drafter's config.json object and checks it against the target it will serve; `label`
// (the file path) prefixes every error message. Errors as load_drafter_config's.
DrafterConfig parse_drafter_config(const nlohmann::json& json, const std::string& label, const ModelConfig& target);

// Reads dir/config.json and checks it against the target it will serve. Refuses (kUnsupported,
// naming the key) what we do not implement; kBadConfig for anything inconsistent.
DrafterConfig load_drafter_config(const std::filesystem::path& dir, const ModelConfig& target);

}  // namespace flashq
