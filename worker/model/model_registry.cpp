#include "worker/model/model_registry.h"

#include <algorithm>

#include "worker/model/decoder_model.h"
#include "worker/model/gpt_oss.h"
#include "worker/model/llama.h"
#include "worker/model/qwen3.h"
#include "worker/model/qwen3_5.h"
#include "worker/model/qwen3_5_moe.h"
#include "worker/model/qwen3_moe.h"
#include "worker/model/qwen3_next.h"
#include "worker/model/safetensors.h"

namespace flashq {

std::span<const ModelFamily> model_families() {
  static const ModelFamily families[] = {
      qwen3_family(),   llama_family(),       qwen3_moe_family(),  gpt_oss_family(),
      qwen3_5_family(), qwen3_5_moe_family(), qwen3_next_family(),
  };
  return families;
}

const ModelFamily* find_model_family(const std::string& model_type, const std::string& architecture) {
  const std::span<const ModelFamily> families = model_families();
  if (!model_type.empty()) {
    auto it = std::find_if(families.begin(), families.end(), [&](const ModelFamily& family) {
      return family.model_type == model_type ||
             std::find(family.model_type_aliases.begin(), family.model_type_aliases.end(), model_type) !=
                 family.model_type_aliases.end();
    });
    return it == families.end() ? nullptr : &*it;
  }
  auto it = std::find_if(families.begin(), families.end(), [&](const ModelFamily& family) {
    return std::find(family.architectures.begin(), family.architectures.end(), architecture) !=
           family.architectures.end();
  });
  return it == families.end() ? &families.front() : &*it;
}

std::string supported_model_types() {
  std::string names;
  for (const ModelFamily& family : model_families()) {
    if (!names.empty()) names += ", ";
    names += family.model_type;
  }
  return names;
}

std::unique_ptr<TargetModel> load_target_model(const std::filesystem::path& dir, Backend& backend) {
  ModelConfig config = load_model_config(dir);
  const WeightStore weights = WeightStore::open(dir);
  return std::make_unique<DecoderModel>(std::move(config), weights, backend);
}

}  // namespace flashq
