// `flashq-model make-tiny`: writes a complete random Qwen3-architecture model directory
// (config.json, generation_config.json, model.safetensors, a small self-consistent tokenizer)
// for tests, or real shapes with random weights (presets) for benchmarks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace flashq {

struct TinyModelSpec {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t inter = 128;
  int64_t vocab = 512;
  int64_t max_position = 4096;
  double rope_theta = 1e6;
  bool tie_embeddings = false;
  DType dtype = DType::kBF16;
  uint64_t seed = 0;
};

// Real shapes: "qwen3-0.6b", "qwen3-4b", "qwen3-8b" (docs/dflash.md §1). kInvalidArgument otherwise.
TinyModelSpec preset_spec(const std::string& name);

// Writes the directory (created if needed). kInvalidArgument for impossible shapes.
void write_tiny_model(const TinyModelSpec& spec, const std::filesystem::path& out);

struct TinyDrafterSpec {
  int64_t layers = 1;
  int64_t block_size = 16;
  uint64_t seed = 0;
  std::vector<int64_t> target_layer_ids;  // empty: spread over the target's layers
};

// `flashq-model make-tiny --drafter-for TARGET`: a random DFlash drafter in the z-lab layout
// (docs/dflash.md §3) for the target in `target_dir`: same hidden size, heads and vocabulary; MASK is
// the target's last embedding row, beyond its tokenizer.
void write_tiny_drafter(const TinyDrafterSpec& spec, const std::filesystem::path& target_dir,
                        const std::filesystem::path& out);

}  // namespace flashq
