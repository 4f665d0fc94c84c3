#include "worker/model/qwen3_moe.h"

#include "worker/model/moe_options.h"

namespace flashq {
namespace {

// Qwen3MoeConfig's keys for the experts (num_local_experts is its alias of num_experts).
void read_experts(const ConfigReader& reader, ModelConfig& config) {
  MoeConfig& moe = config.moe;
  const char* experts_key =
      reader.has("num_local_experts") && !reader.has("num_experts") ? "num_local_experts" : "num_experts";
  moe.num_experts = reader.positive_int(experts_key, 128);
  moe.experts_per_token = reader.positive_int("num_experts_per_tok", 8);
  moe.intermediate_size = reader.positive_int("moe_intermediate_size", 768);
  moe.normalize_top_k = reader.boolean("norm_topk_prob", false);
  moe.sparse_step = reader.positive_int("decoder_sparse_step", 1);
  moe.routing_order = RoutingOrder::kSoftmaxThenTopK;
  moe.activation = ExpertActivation{.kind = ExpertActivationKind::kSwiglu};
  moe.layout = ExpertLayout::kPerExpert;
  if (moe.experts_per_token > moe.num_experts) {
    reader.fail("num_experts_per_tok",
                "must be at most " + std::string(experts_key) + " (" + std::to_string(moe.num_experts) + ")");
  }
  read_mlp_only_layers(reader, config);
}

}  // namespace

ModelFamily qwen3_moe_family() {
  return {.model_type = "qwen3_moe",
          .architectures = {"Qwen3MoeForCausalLM"},
          // Qwen3MoeConfig's: unlike Qwen3Config it has no head_dim default (hidden / heads).
          .config_defaults = {.num_kv_heads = 4,
                              .head_dim = 0,
                              .max_position_embeddings = 32768,
                              .rms_norm_eps = 1e-6,
                              .rope_theta = 10000.0},
          .qk_norm = true,
          .reads_mlp_bias = false,
          .read_family_options = read_experts};
}

}  // namespace flashq
