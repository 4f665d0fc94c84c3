#include "worker/model/moe_options.h"

#include <string>

namespace flashq {

void read_mlp_only_layers(const ConfigReader& reader, ModelConfig& config) {
  if (!reader.has("mlp_only_layers")) return;
  const nlohmann::json& layers = reader.raw("mlp_only_layers");
  if (!layers.is_array()) reader.fail("mlp_only_layers", "must be a list of layer indices");
  for (const nlohmann::json& layer : layers) {
    if (!layer.is_number_integer() || layer.get<int64_t>() < 0 || layer.get<int64_t>() >= config.num_layers) {
      reader.fail("mlp_only_layers", "must hold layer indices below num_hidden_layers (" +
                                         std::to_string(config.num_layers) + "), got " + layer.dump());
    }
    config.moe.dense_layers.push_back(layer.get<int64_t>());
  }
}

}  // namespace flashq
