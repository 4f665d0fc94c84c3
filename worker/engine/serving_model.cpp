#include "worker/engine/serving_model.h"

#include <spdlog/spdlog.h>

#include "kernels/backend_factory.h"
#include "worker/model/model_registry.h"

namespace flashq {

ServingModel ServingModel::load(const std::string& model_dir, const std::string& drafter_dir,
                                const std::string& device) {
  ServingModel s;
  s.backend = make_backend(device);
  // Before the weights: a template the engine cannot render should not cost a load first.
  s.chat_template = load_chat_template(model_dir);
  spdlog::info("{}: chat template from {}", model_dir, s.chat_template.origin);
  s.model = load_target_model(model_dir, *s.backend);
  s.tokenizer = load_tokenizer(model_dir);
  if (!drafter_dir.empty()) {
    s.drafter = DFlashDrafter::load(drafter_dir, *s.model, *s.backend);
    s.proposer = std::make_unique<DFlashProposer>(*s.drafter);
  }
  return s;
}

}  // namespace flashq
