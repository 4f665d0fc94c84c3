// The DFlash drafter and the greedy speculative loop against the independent NumPy reference
// (tests/reference/dflash_reference.py): every step's start, draft tokens, acceptance and bonus
// identical, and the drafter's logits within 1e-4 (relative to their scale), on Qwen3 and on Llama
// targets (biases, Llama 3 RoPE scaling), and on Qwen3-MoE and gpt-oss targets (whose drafters
// are dense Qwen3 layers with the target's attention biases and RoPE); and on drafters whose own
// config.json gives them sliding-window layers (causal, or looking both ways with is_causal
// false), causal full layers, or YaRN RoPE (docs/dflash.md §2.5).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "shared/json_file.h"
#include "tests/engine/dflash_test_pair.h"
#include "tests/engine/reference_steps.h"
#include "tests/engine/llama_targets.h"
#include "tests/engine/moe_targets.h"
#include "tests/engine/recording_proposer.h"
#include "tests/support/reference_files.h"
#include "tests/support/run_command.h"

namespace flashq::testing {
namespace {

struct ReferenceCase {
  const char* name;
  TinyModelSpec target;
  int64_t drafter_layers;
  int64_t block_size;
  nlohmann::json drafter_keys = nlohmann::json::object();  // set on the drafter's config.json
};

// Sliding-window layers as z-lab's drafter configs state them: a layer_types list, the window
// kept only with use_sliding_window (Qwen3Config), is_causal (when given) for every layer.
nlohmann::json sliding_keys(std::vector<std::string> types, bool use_window, int64_t window,
                            std::optional<bool> is_causal = std::nullopt) {
  nlohmann::json keys = {{"layer_types", types}, {"use_sliding_window", use_window}, {"sliding_window", window}};
  if (is_causal) keys["is_causal"] = *is_causal;
  return keys;
}

// YaRN on the drafter alone (its target is unscaled), factor = max positions / original, as
// configs keep them (tests/reference/yarn_reference.py).
nlohmann::json yarn_keys() {
  return {{"rope_scaling",
           {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}, {"beta_fast", 16.0}}},
          {"max_position_embeddings", 128}};
}

class DFlashReference : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(DFlashReference, DraftsAcceptanceAndLogitsMatchNumpy) {
  const ReferenceCase& c = GetParam();
  DFlashTestPair pair(
      c.target,
      {.layers = c.drafter_layers, .block_size = 16, .seed = c.target.seed + 1, .config_overrides = c.drafter_keys});
  pair.set_kv_cache_dtype(DType::kF32);  // the reference keeps keys and values as computed
  std::vector<int32_t> prompt = some_tokens(11, 459, static_cast<uint32_t>(c.target.seed));
  const int64_t steps = 6;

  std::string tokens;
  for (size_t i = 0; i < prompt.size(); ++i) tokens += (i ? "," : "") + std::to_string(prompt[i]);
  const std::string prefix = (pair.drafter_dir / "reference").string();
  CommandResult ref =
      run_command("/usr/bin/python3 tests/reference/dflash_reference.py --target " + pair.target.dir.path().string() +
                  " --drafter " + pair.drafter_dir.path().string() + " --tokens " + tokens + " --steps " +
                  std::to_string(steps) + " --block-size " + std::to_string(c.block_size) + " --out " + prefix);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  nlohmann::json expected = nlohmann::json::parse(read_text_file(prefix + ".json"));
  std::vector<float> expected_logits = read_f32(prefix + ".draft_logits.f32");

  RecordingProposer recorder(*pair.proposer);
  std::vector<TraceRecord> trace;
  run_engine(*pair.target.model, &recorder, {reference_request(prompt, steps, c.block_size)}, 1, &trace);
  expect_steps_match(trace, expected, steps, c.name);
  const size_t compared = expected_logits.size();
  ASSERT_GE(recorder.logits.size(), compared);
  std::vector<float> ours(recorder.logits.begin(), recorder.logits.begin() + static_cast<std::ptrdiff_t>(compared));
  EXPECT_LT(max_normalized_error(ours, expected_logits), 1e-4) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    RandomPairs, DFlashReference,
    ::testing::Values(ReferenceCase{"OneLayerBlock8", f32_target(51), 1, 8},
                      ReferenceCase{"TwoLayersBlock16", f32_target(52, 4, 48, 4, 4, 12), 2, 16},
                      ReferenceCase{"OneKvHeadBlock4", f32_target(53, 2, 32, 8, 1, 8), 1, 4},
                      ReferenceCase{"LlamaBiasesLlama3RopeBlock8", llama_f32_target(54), 1, 8},
                      ReferenceCase{"LlamaOneKvHeadPlainRopeBlock16",
                                    llama_f32_target(55, 2, 32, 8, 1, 8, {.biases = false, .llama3_rope = false}), 2,
                                    16},
                      ReferenceCase{"Qwen3MoeBlock8", qwen3_moe_f32_target(57), 1, 8},
                      ReferenceCase{"GptOssBlock8", gpt_oss_f32_target(58), 2, 8},
                      // Windows of 5 and 6 bind from the first block (an 11-token prompt).
                      ReferenceCase{"SlidingCausalAndFullLayersWindow5Block8", f32_target(61), 2, 8,
                                    sliding_keys({"sliding_attention", "full_attention"}, true, 5)},
                      ReferenceCase{"SlidingTwoSidedWindow6Block8", f32_target(62), 2, 8,
                                    sliding_keys({"sliding_attention", "sliding_attention"}, true, 6, false)},
                      ReferenceCase{"SlidingWithoutUseSlidingWindowIsCausalBlock16", f32_target(63), 1, 16,
                                    sliding_keys({"sliding_attention"}, false, 3)},
                      ReferenceCase{"IsCausalMakesFullLayersCausalBlock8", f32_target(64), 2, 8,
                                    sliding_keys({"full_attention", "sliding_attention"}, true, 4, true)},
                      ReferenceCase{"YarnDrafterBlock8", f32_target(65), 2, 8, yarn_keys()}),
    [](const ::testing::TestParamInfo<ReferenceCase>& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace flashq::testing
