// libFuzzer target for config.json: an input is the text of a model directory's config.json,
// parsed as the worker parses it, once as a target model's (parse_model_config) and once as a
// DFlash drafter's (parse_drafter_config) checked against the demo target and, when the input is
// itself a valid target, against that. A refusal is a kBadConfig or kUnsupported flashq::Error;
// anything else escaping (a nlohmann exception, a sanitizer report) crashes.
//
// What parses must keep the promises the loaders build on: positive sizes, heads that divide,
// an even head_dim, a vocabulary that fits int32, drafter layers inside the target.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "shared/json_file.h"
#include "worker/model/drafter_config.h"
#include "worker/model/model_config.h"

namespace {

using flashq::fuzz::require;

const std::string kLabel = "fuzz/config.json";

void refused(const flashq::Error& e) {
  require(e.code() == flashq::ErrorCode::kBadConfig || e.code() == flashq::ErrorCode::kUnsupported,
          "a refused config.json is kBadConfig or kUnsupported");
  require(std::string_view(e.what()).find(kLabel) != std::string_view::npos, "a refusal names the file");
}

void check_model(const flashq::ModelConfig& c) {
  require(c.hidden_size > 0 && c.intermediate_size > 0 && c.num_layers > 0 && c.vocab_size > 0, "positive sizes");
  require(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, "kv heads divide heads");
  require(c.head_dim > 0 && c.head_dim % 2 == 0, "an even head_dim");
  require(c.vocab_size <= INT32_MAX, "a vocabulary that fits int32");
  require(c.rms_norm_eps > 0 && c.rope_theta > 0, "positive eps and rope theta");
  for (int32_t id : c.eos_token_ids) require(id >= 0, "eos ids are token ids");
}

void check_drafter(const nlohmann::json& json, const flashq::ModelConfig& target) {
  try {
    const flashq::DrafterConfig drafter = flashq::parse_drafter_config(json, kLabel, target);
    check_model(drafter.layers);
    require(drafter.block_size >= 2, "a block of at least two");
    require(drafter.mask_token_id >= 0 && drafter.mask_token_id < target.vocab_size, "the mask inside the vocabulary");
    require(!drafter.target_layer_ids.empty(), "some target layers");
    for (int64_t id : drafter.target_layer_ids) require(id >= 0 && id < target.num_layers, "target layers that exist");
  } catch (const flashq::Error& e) {
    refused(e);
  }
}

// The demo pair's target (models/demo/target/config.json).
flashq::ModelConfig demo_target() {
  flashq::ModelConfig target;
  target.model_type = "qwen3";
  target.hidden_size = 256;
  target.intermediate_size = 768;
  target.num_layers = 4;
  target.num_heads = 4;
  target.num_kv_heads = 2;
  target.head_dim = 64;
  target.vocab_size = 4097;
  target.max_position_embeddings = 512;
  return target;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const flashq::ModelConfig kDemoTarget = demo_target();
  nlohmann::json json;
  try {
    json = flashq::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), kLabel);
  } catch (const flashq::Error& e) {
    refused(e);
    return 0;
  }
  try {
    const flashq::ModelConfig target = flashq::parse_model_config(json, kLabel);
    check_model(target);
    check_drafter(json, target);
  } catch (const flashq::Error& e) {
    refused(e);
  }
  check_drafter(json, kDemoTarget);
  return 0;
}
