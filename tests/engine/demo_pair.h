// The demo pair (models/demo: a small trained Qwen3 target and its DFlash drafter, committed to
// the repository), loaded on the CPU: the one pair whose drafter the target really accepts, so the
// tests of speculation that need acceptance to happen run on it.
#pragma once

#include <filesystem>
#include <memory>

#include "kernels/backend.h"
#include "worker/engine/dflash_proposer.h"
#include "worker/model/dflash_drafter.h"
#include "worker/model/model_registry.h"
#include "worker/text/tokenizer.h"

namespace flashq::testing {

struct DemoPair {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<TargetModel> target = load_target_model(std::filesystem::path("models/demo/target"), *backend);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(std::filesystem::path("models/demo/target"));
  std::unique_ptr<DFlashDrafter> drafter =
      DFlashDrafter::load(std::filesystem::path("models/demo/drafter"), *target, *backend);
  std::unique_ptr<DFlashProposer> proposer = std::make_unique<DFlashProposer>(*drafter);
};

}  // namespace flashq::testing
