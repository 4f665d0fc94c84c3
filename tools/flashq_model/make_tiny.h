// `flashq-model make-tiny`: writes a complete random model directory of a family this build runs
// (Qwen3, Llama, Qwen3-MoE or gpt-oss: config.json as Hugging Face writes it, generation_config.json,
// model.safetensors, a small self-consistent tokenizer) for tests, or real shapes with random
// weights (presets) for benchmarks; and random DFlash drafters for such targets.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace flashq {

struct TinyModelSpec {
  std::string family = "qwen3";  // "qwen3", "llama", "qwen3-moe", "gpt-oss", "qwen3_5", "qwen3_5_moe", "qwen3_next"
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
  // Llama only (LlamaConfig's keys): biases of the q/k/v/o and of the gate/up/down projections.
  bool attention_bias = false;
  bool mlp_bias = false;
  // Llama only: 0 writes rope_scaling null; above 0, rope_type llama3 with this factor and the
  // three fields that follow.
  double rope_scaling_factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  // qwen3-moe only (Qwen3MoeConfig's keys): `experts` SwiGLU experts of `expert_inter`,
  // `experts_per_token` per token, on every `sparse_step`-th layer but those of `dense_layers`.
  int64_t experts = 8;
  int64_t experts_per_token = 2;
  int64_t expert_inter = 32;
  bool norm_topk_prob = true;
  int64_t sparse_step = 1;
  std::vector<int64_t> dense_layers;
  // gpt-oss only (GptOssConfig's keys): experts (`experts`, `experts_per_token`, of `inter`) in
  // MXFP4, layers alternating sliding (this window) and full attention, sinks, YaRN RoPE of
  // `yarn_factor` over `original_max_position`, and the clamped SwiGLU's limit.
  int64_t sliding_window = 4;
  double yarn_factor = 32.0;
  double swiglu_limit = 7.0;
  // The hybrid families (qwen3_5, qwen3_5_moe, qwen3_next; Qwen3_5TextConfig's and
  // Qwen3NextConfig's keys): Gated DeltaNet layers of these sizes, every
  // full_attention_interval-th layer attending; the MoE ones' experts are `experts` of
  // `expert_inter` with a shared expert of `shared_expert_inter`. `multimodal` writes Qwen3.5's
  // ForConditionalGeneration layout (text_config, model.language_model.*, and a vision and an
  // MTP tensor a text model never reads).
  int64_t linear_key_heads = 2;
  int64_t linear_value_heads = 4;
  int64_t linear_key_dim = 16;
  int64_t linear_value_dim = 16;
  int64_t conv_kernel = 4;
  int64_t full_attention_interval = 4;
  int64_t shared_expert_inter = 32;
  double partial_rotary_factor = 0.25;
  bool multimodal = false;
  DType dtype = DType::kBF16;
  uint64_t seed = 0;
};

// Real shapes: "qwen3-0.6b", "qwen3-4b", "qwen3-8b" (docs/dflash.md §1), "llama3.2-1b",
// "llama3.1-8b", "qwen3-30b-a3b", "gpt-oss-20b" (docs/models.md). kInvalidArgument otherwise.
TinyModelSpec preset_spec(const std::string& name);

// Writes the directory (created if needed); kNone leaves out model.safetensors (a directory to
// size a model by, not to load). kInvalidArgument for impossible shapes.
enum class TinyWeights { kRandom, kNone };
void write_tiny_model(const TinyModelSpec& spec, const std::filesystem::path& out,
                      TinyWeights weights = TinyWeights::kRandom);

struct TinyDrafterSpec {
  int64_t layers = 1;
  int64_t block_size = 16;
  uint64_t seed = 0;
  std::vector<int64_t> target_layer_ids;  // empty: spread over the target's layers
  // Keys set on the drafter's config.json after the target's are copied (layer_types,
  // use_sliding_window, sliding_window, is_causal, rope_scaling...): a drafter whose own
  // config differs from its target's.
  nlohmann::json config_overrides = nlohmann::json::object();
  // A DFlash2 drafter (docs/dflash.md §7): architectures ["DFlash2DraftModel"] with these
  // dflash_config keys (by default the published ones), each layer's two convolutions and the
  // candidate selector's tensors.
  bool dflash2 = false;
  int64_t conv_kernel_size = 2;
  int64_t conv_group_size = 16;
  int64_t selector_rank = 256;
  int64_t selector_top_k = 16;
};

// `flashq-model make-tiny --drafter-for TARGET`: a random DFlash drafter in the z-lab layout
// (docs/dflash.md §3) for the target in `target_dir`, of any family: same hidden size, heads and
// vocabulary, Qwen3 layers (q/k norm) with the target's RoPE (theta and scaling) and attention
// biases; MASK is the target's last embedding row, beyond its tokenizer.
void write_tiny_drafter(const TinyDrafterSpec& spec, const std::filesystem::path& target_dir,
                        const std::filesystem::path& out);

}  // namespace flashq
