// DFlash2 drafters (docs/dflash.md §7) against the independent NumPy reference
// (tests/reference/dflash2_reference.py): greedy decoding's every step (start, draft, acceptance,
// bonus) identical, the drafter's logits and the candidate selector's scores within 1e-4 of
// their scale; with the published layout's keys (all layers sliding and non-causal, an output
// multiplier and soft-capping) and without.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shared/json_file.h"
#include "tests/engine/dflash_test_pair.h"
#include "tests/engine/recording_proposer.h"
#include "tests/engine/reference_steps.h"
#include "tests/support/reference_files.h"
#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

struct Dflash2Case {
  const char* name;
  TinyModelSpec target;
  int64_t drafter_layers;
  int64_t block_size;
  nlohmann::json drafter_keys = nlohmann::json::object();
};

class Dflash2Reference : public ::testing::TestWithParam<Dflash2Case> {};

TEST_P(Dflash2Reference, DraftsScoresAndLogitsMatchNumpy) {
  const Dflash2Case& c = GetParam();
  TinyDrafterSpec spec{.layers = c.drafter_layers, .block_size = 16, .seed = c.target.seed + 1};
  spec.config_overrides = c.drafter_keys;
  spec.dflash2 = true;
  spec.conv_group_size = 8;
  spec.selector_top_k = 8;
  DFlashTestPair pair(c.target, spec);
  pair.set_kv_cache_dtype(DType::kF32);
  const std::vector<int32_t> prompt = some_tokens(11, 459, static_cast<uint32_t>(c.target.seed));
  const int64_t steps = 6;

  std::string tokens;
  for (size_t i = 0; i < prompt.size(); ++i) tokens += (i ? "," : "") + std::to_string(prompt[i]);
  const std::string prefix = (pair.drafter_dir / "reference").string();
  const CommandResult ref =
      run_command("/usr/bin/python3 tests/reference/dflash2_reference.py --target " + pair.target.dir.path().string() +
                  " --drafter " + pair.drafter_dir.path().string() + " --tokens " + tokens + " --steps " +
                  std::to_string(steps) + " --block-size " + std::to_string(c.block_size) + " --out " + prefix);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const nlohmann::json expected = nlohmann::json::parse(read_text_file(prefix + ".json"));

  RecordingProposer recorder(*pair.proposer);
  std::vector<TraceRecord> trace;
  run_engine(*pair.target.model, &recorder, {reference_request(prompt, steps, c.block_size)}, 1, &trace);
  expect_steps_match(trace, expected, steps, c.name);
  for (const auto& [what, ours] :
       {std::pair{"draft_logits", &recorder.logits}, {"selector_scores", &recorder.scores}}) {
    const std::vector<float> want = read_f32(prefix + "." + what + ".f32");
    ASSERT_GE(ours->size(), want.size()) << what;
    const std::vector<float> compared(ours->begin(), ours->begin() + static_cast<std::ptrdiff_t>(want.size()));
    EXPECT_LT(max_normalized_error(compared, want), 1e-4) << c.name << " " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(RandomPairs, Dflash2Reference,
                         ::testing::Values(Dflash2Case{"TwoLayersBlock8", f32_target(71), 2, 8},
                                           Dflash2Case{"OneLayerBlock16", f32_target(72, 2, 32, 8, 1, 8), 1, 16},
                                           // z-lab's published DFlash2 config: every layer sliding with is_causal
                                           // false, an output multiplier and soft-capping (here small enough to bind).
                                           Dflash2Case{"PublishedKeysBlock8",
                                                       f32_target(73),
                                                       2,
                                                       8,
                                                       {{"layer_types", {"sliding_attention", "sliding_attention"}},
                                                        {"use_sliding_window", true},
                                                        {"sliding_window", 6},
                                                        {"is_causal", false},
                                                        {"dflash_config",
                                                         {{"mask_token_id", 511},
                                                          {"target_layer_ids", {0, 2}},
                                                          {"block_size", 16},
                                                          {"conv_kernel_size", 2},
                                                          {"conv_group_size", 8},
                                                          {"selector_rank", 32},
                                                          {"selector_top_k", 8},
                                                          {"output_multiplier", 0.7},
                                                          {"final_logit_softcapping", 2.5}}}}},
                                           Dflash2Case{"ThreeTapsBlock8",
                                                       f32_target(74),
                                                       1,
                                                       8,
                                                       {{"dflash_config",
                                                         {{"mask_token_id", 511},
                                                          {"target_layer_ids", {1}},
                                                          {"conv_kernel_size", 3},
                                                          {"conv_group_size", 16},
                                                          {"selector_rank", 16},
                                                          {"selector_top_k", 4}}}}}),
                         [](const ::testing::TestParamInfo<Dflash2Case>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace
}  // namespace flashq::testing
