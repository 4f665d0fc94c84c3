// `flashq-model make-tiny` for the hybrid families (qwen3_5, qwen3_5_moe, qwen3_next;
// docs/models.md): their config.json as Hugging Face writes Qwen3_5TextConfig, the multimodal
// Qwen3_5Config around it, or Qwen3NextConfig, and their layers' tensors in the published layouts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tools/flashq_model/make_tiny.h"
#include "tools/flashq_model/random_tensors.h"
#include "worker/model/model_config.h"

namespace flashq {

bool is_hybrid_family(const std::string& family);

// config.json of a hybrid spec, with these special token ids.
nlohmann::json hybrid_config_json(const TinyModelSpec& spec, int32_t bos, const nlohmann::json& eos);

// Where the language model's tensors go: model.language_model. (multimodal) or model.
std::string hybrid_weight_prefix(const TinyModelSpec& spec);

// Layer `layer`'s tensors under `prefix` (e.g. model.layers.3.): zero-centred norms, the gated
// attention or the Gated DeltaNet, and the dense MLP or the experts with the shared expert.
void add_hybrid_layer(RandomTensors& tensors, const std::string& prefix, const ModelConfig& config, int64_t layer);

// The vision and MTP tensors a multimodal checkpoint carries and a text model skips.
void add_multimodal_extras(RandomTensors& tensors, const ModelConfig& config);

// A drafter's config.json made from a hybrid target's: the language model's keys as Qwen3
// layers read them (no linear-attention plan, whole-head RoPE at the target's theta).
nlohmann::json drafter_config_of_hybrid(const nlohmann::json& target_config);

}  // namespace flashq
