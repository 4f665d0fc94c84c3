#include "worker/model/hybrid_options.h"

#include <string>

namespace flashq {
namespace {

constexpr int64_t kMaxHybridLayers = 4096;

// partial_rotary_factor: in rope_parameters (transformers 5, Qwen3.5) or at the top level
// (Qwen3-Next); 0.25 when neither says. The rotating part of a head is int(head_dim * factor).
int64_t read_rotary_dims(const ConfigReader& reader, int64_t head_dim) {
  double factor = 0.25;
  const char* key = "partial_rotary_factor";
  if (reader.has("rope_parameters") && reader.raw("rope_parameters").is_object() &&
      reader.raw("rope_parameters").contains(key)) {
    factor = ConfigReader(reader.raw("rope_parameters"), "rope_parameters").positive_number(key);
  } else if (reader.has(key)) {
    factor = reader.positive_number(key);
  }
  if (factor > 1.0) reader.fail(key, "must be at most 1");
  const auto dims = static_cast<int64_t>(static_cast<double>(head_dim) * factor);
  if (dims < 2 || dims % 2 != 0) {
    reader.fail(key, "gives " + std::to_string(dims) + " rotary dims of a head of " + std::to_string(head_dim) +
                         "; they must be even and at least 2");
  }
  return dims;
}

}  // namespace

void read_hybrid_options(const ConfigReader& reader, ModelConfig& config, bool grouped_projection) {
  LinearAttentionConfig& linear = config.linear_attention;
  linear.key_heads = reader.positive_int("linear_num_key_heads", 16);
  linear.value_heads = reader.positive_int("linear_num_value_heads", 32);
  linear.key_head_dim = reader.positive_int("linear_key_head_dim", 128);
  linear.value_head_dim = reader.positive_int("linear_value_head_dim", 128);
  linear.conv_kernel = reader.positive_int("linear_conv_kernel_dim", 4);
  linear.grouped_projection = grouped_projection;
  if (linear.value_heads % linear.key_heads != 0) {
    reader.fail("linear_num_value_heads",
                "must be a multiple of linear_num_key_heads (" + std::to_string(linear.key_heads) + ")");
  }
  if (linear.conv_kernel < 2 || linear.conv_kernel > 16) reader.fail("linear_conv_kernel_dim", "must be 2 to 16");
  // A layer plan is one entry a layer: a depth no checkpoint has is refused before it is built.
  if (config.num_layers > kMaxHybridLayers) {
    reader.fail("num_hidden_layers", "must be at most " + std::to_string(kMaxHybridLayers));
  }
  // The plan without layer_types (which, when given, replaces it: read after this).
  const int64_t interval = reader.positive_int("full_attention_interval", 4);
  linear.layers.clear();
  for (int64_t layer = 0; layer < config.num_layers; ++layer) linear.layers.push_back((layer + 1) % interval != 0);

  // The attention always gates its output (transformers reads no key for it): a config that
  // says otherwise describes another model.
  reader.refuse_if(!reader.boolean("attn_output_gate", true), "attn_output_gate", "false");
  config.attention_output_gate = true;
  config.zero_centred_norms = true;
  config.qk_norm = true;
  config.rotary_dims = read_rotary_dims(reader, config.head_dim);
}

void read_hybrid_experts(const ConfigReader& reader, ModelConfig& config, const HybridExpertDefaults& defaults) {
  MoeConfig& moe = config.moe;
  moe.num_experts = reader.positive_int("num_experts", defaults.num_experts);
  moe.experts_per_token = reader.positive_int("num_experts_per_tok", defaults.experts_per_token);
  moe.intermediate_size = reader.positive_int("moe_intermediate_size", defaults.intermediate_size);
  moe.shared_expert_intermediate_size =
      reader.positive_int("shared_expert_intermediate_size", defaults.shared_intermediate_size);
  moe.routing_order = RoutingOrder::kSoftmaxThenTopK;
  moe.activation = ExpertActivation{.kind = ExpertActivationKind::kSwiglu};
  if (moe.experts_per_token > moe.num_experts) {
    reader.fail("num_experts_per_tok", "must be at most num_experts (" + std::to_string(moe.num_experts) + ")");
  }
}

}  // namespace flashq
