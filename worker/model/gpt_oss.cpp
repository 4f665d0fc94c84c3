#include "worker/model/gpt_oss.h"

namespace flashq {
namespace {

// GptOssExperts' alpha: a constant of the model's code, which recent configs also write as
// swiglu_alpha.
constexpr double kSwigluAlpha = 1.702;

// GptOssConfig's keys for the experts, the sinks and the sliding layers.
void read_gpt_oss(const ConfigReader& reader, ModelConfig& config) {
  MoeConfig& moe = config.moe;
  // num_experts is the attribute map's other name (GptOssConfig); the legacy experts_per_token
  // key is not read.
  moe.num_experts = reader.positive_int(
      reader.has("num_experts") && !reader.has("num_local_experts") ? "num_experts" : "num_local_experts", 128);
  moe.experts_per_token = reader.positive_int("num_experts_per_tok", 4);
  moe.intermediate_size = config.intermediate_size;  // an expert's, gpt-oss has no dense MLP
  moe.normalize_top_k = false;                       // the softmax over the chosen sums to one already
  moe.sparse_step = 1;
  moe.routing_order = RoutingOrder::kTopKThenSoftmax;
  moe.activation = ExpertActivation{.kind = ExpertActivationKind::kClampedSwiglu,
                                    .alpha = static_cast<float>(reader.positive_number("swiglu_alpha", kSwigluAlpha)),
                                    .limit = static_cast<float>(reader.positive_number("swiglu_limit", 7.0))};
  if (moe.experts_per_token > moe.num_experts) {
    reader.fail("num_experts_per_tok", "must be at most num_local_experts (" + std::to_string(moe.num_experts) + ")");
  }
  // The published checkpoints keep the experts in MXFP4 (quantization_config); experts stored
  // dense (a dequantized copy) are another layout, not implemented.
  std::string quantization = "none";
  if (reader.has("quantization_config")) {
    ConfigReader q(reader.raw("quantization_config"), "quantization_config");
    quantization = q.string("quant_method", "none");
  }
  reader.refuse_if(quantization != "mxfp4", "quantization_config",
                   "quant_method '" + quantization + "' (gpt-oss experts are read as MXFP4 only)");
  moe.layout = ExpertLayout::kStackedMxfp4;

  config.attention_sinks = true;
  config.sliding_window = reader.positive_int("sliding_window", 128);
  // GptOssConfig's default layer_types: sliding first, then full, alternating (a config's own
  // list replaces it: ModelFamily::reads_layer_types).
  config.sliding_layers.clear();
  for (int64_t layer = 0; layer < config.num_layers; ++layer) config.sliding_layers.push_back(layer % 2 == 0);
}

}  // namespace

ModelFamily gpt_oss_family() {
  return {.model_type = "gpt_oss",
          .architectures = {"GptOssForCausalLM"},
          .config_defaults = {.num_kv_heads = 8,
                              .head_dim = 64,
                              .max_position_embeddings = 131072,
                              .rms_norm_eps = 1e-5,
                              .rope_theta = 150000.0,
                              .attention_bias = true},
          .qk_norm = false,
          .reads_mlp_bias = false,
          .reads_layer_types = true,
          .read_family_options = read_gpt_oss};
}

}  // namespace flashq
