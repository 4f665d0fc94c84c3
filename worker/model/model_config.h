// The hyper-parameters of a decoder-only model directory, read from config.json (and the eos ids
// from generation_config.json) exactly as Hugging Face writes them. config.json's model_type
// names the family (model_registry.h): one this build does not have is refused naming those it
// has, and keys a config leaves out take that family's defaults. Anything that changes the
// computation and that no family here implements is refused with a message naming the key
// (docs/models.md lists the keys read and those refused).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"

namespace flashq {

// How a family stores its experts' tensors (moe_mlp.h).
enum class ExpertLayout : uint8_t {
  kPerExpert,     // Qwen3-MoE: mlp.gate.weight, mlp.experts.{e}.{gate,up,down}_proj.weight
  kStackedMxfp4,  // gpt-oss: mlp.router.{weight,bias}, mlp.experts.{gate_up,down}_proj_{blocks,scales,bias}
  kFusedGateUp,   // Qwen3.5-MoE: mlp.gate.weight, mlp.experts.gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I]
};

// The mixture-of-experts MLPs of a family that has them (num_experts 0: every MLP is dense).
struct MoeConfig {
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;      // num_experts_per_tok
  int64_t intermediate_size = 0;      // an expert's: moe_intermediate_size (gpt-oss: intermediate_size)
  bool normalize_top_k = false;       // norm_topk_prob (softmax-then-top-k routing only)
  int64_t sparse_step = 1;            // decoder_sparse_step: every step-th layer is sparse
  std::vector<int64_t> dense_layers;  // mlp_only_layers: dense whatever the step
  RoutingOrder routing_order = RoutingOrder::kSoftmaxThenTopK;
  ExpertActivation activation;
  ExpertLayout layout = ExpertLayout::kPerExpert;
  // A shared expert beside the routed ones (Qwen3.5-MoE, Qwen3-Next): a SwiGLU MLP of this size
  // on every row, times sigmoid(shared_expert_gate(x)); 0: none.
  int64_t shared_expert_intermediate_size = 0;

  // Whether layer `layer`'s MLP is the experts (Qwen3MoeDecoderLayer's rule).
  bool sparse_layer(int64_t layer) const;
  MoeRouting routing() const {
    return {.top_k = experts_per_token, .order = routing_order, .normalize_top_k = normalize_top_k};
  }
};

// The Gated DeltaNet (linear attention) layers of the hybrid families (Qwen3.5, Qwen3-Next;
// docs/models.md): which layers they are, and their sizes (linear_* keys).
struct LinearAttentionConfig {
  std::vector<bool> layers;  // per layer: linear attention; empty: none
  int64_t key_heads = 0, value_heads = 0;         // linear_num_key_heads, linear_num_value_heads
  int64_t key_head_dim = 0, value_head_dim = 0;   // linear_key_head_dim, linear_value_head_dim
  int64_t conv_kernel = 0;                        // linear_conv_kernel_dim
  // Qwen3-Next's in_proj_qkvz / in_proj_ba (grouped per key head); else Qwen3.5's in_proj_qkv,
  // in_proj_z, in_proj_b, in_proj_a.
  bool grouped_projection = false;

  int64_t key_dim() const { return key_heads * key_head_dim; }
  int64_t value_dim() const { return value_heads * value_head_dim; }
  bool linear_layer(int64_t layer) const {
    return static_cast<size_t>(layer) < layers.size() && layers[static_cast<size_t>(layer)];
  }
};

struct ModelConfig {
  std::string model_type;    // the family, e.g. qwen3
  std::string architecture;  // architectures[0], e.g. Qwen3ForCausalLM
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // read from config.json, or the family's default
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 1e6;
  // rope_scaling (or rope_parameters): none, linear, llama3 or yarn; other kinds are refused.
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_factor = 1.0;             // linear, llama3, yarn
  double rope_low_freq_factor = 1.0;    // llama3
  double rope_high_freq_factor = 4.0;   // llama3
  int64_t rope_original_max_position = 8192;  // llama3, yarn: original_max_position_embeddings
  double rope_beta_fast = 32.0;               // yarn
  double rope_beta_slow = 1.0;                // yarn
  bool rope_truncate = true;                  // yarn
  double rope_attention_factor = 1.0;         // yarn: what cos and sin are multiplied by (given or derived)
  bool qk_norm = false;         // the family's per-head q/k RMSNorm (Qwen3)
  bool attention_bias = false;  // q, k, v and o projections have biases
  bool mlp_bias = false;        // gate, up and down projections have biases (Llama's mlp_bias)
  bool tie_word_embeddings = false;
  // gpt-oss's attention: a learned logit per head that joins each softmax (self_attn.sinks), and
  // layers (layer_types "sliding_attention") that attend only the last sliding_window positions.
  bool attention_sinks = false;
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // per layer; empty: none
  MoeConfig moe;
  // The hybrid families' (Qwen3.5, Qwen3-Next): the linear-attention layers; a gate per query
  // element from q_proj (its rows [query | gate] per head) multiplying the attention's output by
  // sigmoid(gate); RMSNorm weights stored around 0 (the scale is 1 + w); RoPE on the first
  // rotary_dims of each head only (partial_rotary_factor; 0: the whole head).
  LinearAttentionConfig linear_attention;
  bool attention_output_gate = false;
  bool zero_centred_norms = false;
  int64_t rotary_dims = 0;
  std::vector<int32_t> eos_token_ids;  // config.json and generation_config.json, deduplicated
};

// The layers that attend (every layer but the linear-attention ones), in order: the KV cache's
// layers are these.
std::vector<int64_t> attention_layers(const ModelConfig& config);

// The window layer `layer` attends over (0: every position before it).
int64_t attention_window(const ModelConfig& config, int64_t layer);
// Every attention layer's window (attention_layers' order), or nothing when none attends one.
std::vector<int64_t> attention_windows(const ModelConfig& config);

// The RoPE the config asks for, as the backend ops take it.
RopeOptions rope_options(const ModelConfig& config);

// The values of keys a family's config.json may leave out: its Hugging Face config class's
// defaults. 0 for num_kv_heads and head_dim: derived (num_attention_heads; hidden / heads).
struct ModelConfigDefaults {
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool attention_bias = false;
  int64_t intermediate_size = 0;  // 0: required
};

// Parses a config.json object (a multimodal one's text_config); `label` (the file path) prefixes
// every error message.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& label);

// Reads dir/config.json and, when present, dir/generation_config.json.
ModelConfig load_model_config(const std::filesystem::path& dir);

}  // namespace flashq
