// Config keys the mixture-of-experts families share (Qwen3-MoE, Qwen3-Next).
#pragma once

#include "worker/model/config_reader.h"
#include "worker/model/model_config.h"

namespace flashq {

// mlp_only_layers: layers whose MLP is dense whatever decoder_sparse_step says (indices below
// num_hidden_layers), into config.moe.dense_layers.
void read_mlp_only_layers(const ConfigReader& reader, ModelConfig& config);

}  // namespace flashq
