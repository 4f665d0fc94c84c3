// Lossless speculative decoding (docs/dflash.md §2.4): at temperature 0 the output with DFlash equals
// the output without it, token for token, for many prompts over several random target/drafter
// pairs (Qwen3, Llama, Qwen3-MoE, gpt-oss and the hybrid Qwen3.5 / Qwen3-Next targets), block
// sizes 2..16, alone and in mixed batches where sequences join and leave; with float32 and with
// bf16 KV caches; and with drafters of sliding-window layers and YaRN RoPE, and DFlash2 drafters
// (greedy drafts by the candidate selector).
#include <gtest/gtest.h>

#include "tests/engine/dflash_test_pair.h"
#include "tests/engine/hybrid_targets.h"
#include "tests/engine/llama_targets.h"
#include "tests/engine/moe_targets.h"

namespace flashq::testing {
namespace {

SequenceRequest request_for(std::vector<int32_t> prompt, SpecMode spec, int64_t block_size, int64_t max_tokens) {
  SequenceRequest r;
  r.generation.prompt_tokens = std::move(prompt);
  r.generation.max_tokens = max_tokens;
  r.generation.ignore_eos = true;
  r.spec = spec;
  r.block_size = block_size;
  return r;
}

struct PairCase {
  const char* name;
  TinyModelSpec target;
  int64_t drafter_layers;
  DType kv_dtype = DType::kF32;                            // the KV caches' element type
  nlohmann::json drafter_keys = nlohmann::json::object();  // set on the drafter's config.json
  bool dflash2 = false;                                    // a DFlash2 drafter (the selector's drafts)
};

class Lossless : public ::testing::TestWithParam<PairCase> {};

TEST_P(Lossless, EveryBlockSizeReproducesTargetOnlyDecoding) {
  const PairCase& c = GetParam();
  DFlashTestPair pair(c.target, {.layers = c.drafter_layers,
                                 .block_size = 16,
                                 .seed = c.target.seed,
                                 .config_overrides = c.drafter_keys,
                                 .dflash2 = c.dflash2});
  pair.set_kv_cache_dtype(c.kv_dtype);
  TargetModel& model = *pair.target.model;
  for (int prompt_index = 0; prompt_index < 17; ++prompt_index) {
    const int64_t block = 2 + prompt_index % 15;  // 2..16
    std::vector<int32_t> prompt = some_tokens(3 + static_cast<size_t>(prompt_index * 5 % 23), 459,
                                              static_cast<uint32_t>(prompt_index * 7 + c.target.seed));
    const int64_t max_tokens = 20 + prompt_index % 7;
    auto plain = run_engine(model, nullptr, {request_for(prompt, SpecMode::kOff, 0, max_tokens)}, 1);
    std::vector<TraceRecord> trace;
    auto speculative =
        run_engine(model, pair.proposer.get(), {request_for(prompt, SpecMode::kDflash, block, max_tokens)}, 1, &trace);
    ASSERT_EQ(speculative[0], plain[0]) << c.name << " prompt " << prompt_index << " block " << block;
    ASSERT_FALSE(trace.empty());
    for (const TraceRecord& step : trace) EXPECT_LE(static_cast<int64_t>(step.draft.size()), block - 1);
  }
}

TEST_P(Lossless, MixedBatchesJoiningAndLeavingMatchEachSequenceAlone) {
  const PairCase& c = GetParam();
  DFlashTestPair pair(c.target, {.layers = c.drafter_layers,
                                 .block_size = 16,
                                 .seed = c.target.seed,
                                 .config_overrides = c.drafter_keys,
                                 .dflash2 = c.dflash2});
  pair.set_kv_cache_dtype(c.kv_dtype);
  TargetModel& model = *pair.target.model;
  const SpecMode modes[] = {SpecMode::kDflash, SpecMode::kOff, SpecMode::kAuto};
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < 8; ++i) {
    requests.push_back(request_for(some_tokens(4 + static_cast<size_t>(i * 3), 459, static_cast<uint32_t>(100 + i)),
                                   modes[i % 3], i % 3 == 1 ? 0 : 2 + 2 * i, 12 + 3 * i));
  }
  std::vector<std::vector<int32_t>> alone;
  for (const SequenceRequest& r : requests) {
    alone.push_back(run_engine(
        model, nullptr, {request_for(r.generation.prompt_tokens, SpecMode::kOff, 0, r.generation.max_tokens)}, 1)[0]);
  }
  // 3 slots: sequences join as others finish; all 8 at once: the batch with 7 others.
  for (int64_t slots : {3, 8}) {
    auto together = run_engine(model, pair.proposer.get(), requests, slots);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(together[i], alone[i]) << c.name << " sequence " << i << " with " << slots << " slots";
    }
  }
}

// Greedy sequences take only each row's argmax from the pass (worked out on the backend);
// a batch with a sampling sequence in it brings every row's logits to the host instead. The
// greedy sequence's tokens must be the same either way.
TEST_P(Lossless, GreedySequenceBatchedWithASamplingOneKeepsItsTokens) {
  const PairCase& c = GetParam();
  DFlashTestPair pair(c.target, {.layers = c.drafter_layers,
                                 .block_size = 16,
                                 .seed = c.target.seed,
                                 .config_overrides = c.drafter_keys,
                                 .dflash2 = c.dflash2});
  pair.set_kv_cache_dtype(c.kv_dtype);
  TargetModel& model = *pair.target.model;
  const std::vector<int32_t> prompt = some_tokens(6, 459, 11 + static_cast<uint32_t>(c.target.seed));
  auto plain = run_engine(model, nullptr, {request_for(prompt, SpecMode::kOff, 0, 30)}, 1);
  SequenceRequest sampled = request_for(some_tokens(5, 459, 3), SpecMode::kDflash, 4, 30);
  sampled.generation.sampling.temperature = 0.8f;
  sampled.generation.sampling.seed = 5;
  auto together = run_engine(model, pair.proposer.get(), {request_for(prompt, SpecMode::kDflash, 4, 30), sampled}, 2);
  EXPECT_EQ(together[0], plain[0]) << c.name;
  EXPECT_EQ(together[1].size(), 30u);
}

// `auto` with a random drafter: it stops drafting and probes now and then, each time after more
// than DFlashProposer::kRecentRows tokens, so its draft context skips positions. The drafts
// change; the output must not. The passes are costed as on a GPU (a verify block as dear as a
// decode step), not timed: on a loaded CPU the timed costs could make drafting look hopeless
// and the sequence would never probe, which is not the case under test.
TEST_P(Lossless, AutoSequencesThatPauseAndResumeDraftingStayLossless) {
  const PairCase& c = GetParam();
  DFlashTestPair pair(c.target, {.layers = c.drafter_layers,
                                 .block_size = 16,
                                 .seed = c.target.seed,
                                 .config_overrides = c.drafter_keys,
                                 .dflash2 = c.dflash2});
  pair.set_kv_cache_dtype(c.kv_dtype);
  TargetModel& model = *pair.target.model;
  const std::vector<int32_t> prompt = some_tokens(9, 459, 7 + static_cast<uint32_t>(c.target.seed));
  const int64_t max_tokens = 200;
  auto plain = run_engine(model, nullptr, {request_for(prompt, SpecMode::kOff, 0, max_tokens)}, 1);
  std::vector<TraceRecord> trace;
  auto speculative =
      run_engine(model, pair.proposer.get(), {request_for(prompt, SpecMode::kAuto, 0, max_tokens)}, 1, &trace,
                 {.target_pass_timer = [](int64_t, double) { return 1e-3; },
                  .draft_pass_timer = [](int64_t, double) { return 1e-4; }});
  ASSERT_EQ(speculative[0], plain[0]) << c.name;
  bool resumed_after_a_gap = false;
  for (size_t i = 1; i < trace.size(); ++i) {
    resumed_after_a_gap = resumed_after_a_gap || trace[i].start - trace[i - 1].start > DFlashProposer::kRecentRows + 1;
  }
  EXPECT_TRUE(resumed_after_a_gap) << "no draft after a pause longer than the ring: the test missed its case";
}

INSTANTIATE_TEST_SUITE_P(
    RandomPairs, Lossless,
    ::testing::Values(
        PairCase{"Gqa3Layers", f32_target(41), 1}, PairCase{"Mha4Layers", f32_target(42, 4, 48, 4, 4, 12), 2},
        PairCase{"OneKvHead2Layers", f32_target(43, 2, 32, 8, 1, 8), 1},
        PairCase{"LlamaGqaBiasesLlama3Rope", llama_f32_target(47), 1},
        PairCase{"LlamaOneKvHeadPlainRope2Layers",
                 llama_f32_target(45, 2, 32, 8, 1, 8, {.biases = false, .llama3_rope = false}), 2},
        PairCase{"Qwen3MoeTop2Of8", qwen3_moe_f32_target(48), 1},
        PairCase{"Qwen3MoeTop4Of16EveryOtherLayerUnnormalised",
                 qwen3_moe_f32_target(49, 4, 64, 4, 2, 16,
                                      {.experts = 16,
                                       .experts_per_token = 4,
                                       .sparse_step = 2,
                                       .dense_layers = {3},
                                       .norm_topk_prob = false}),
                 2},
        PairCase{"GptOssWindow4Top2Of8", gpt_oss_f32_target(50), 1},
        PairCase{"GptOssWindow8Top4Of16ThreeLayers", gpt_oss_f32_target(59, 3, 8, 16, 4), 2},
        // bf16 caches: keys and values rounded as stored, read so by both passes.
        PairCase{"Gqa3LayersBf16Kv", f32_target(41), 1, DType::kBF16},
        PairCase{"LlamaGqaBiasesLlama3RopeBf16Kv", llama_f32_target(47), 1, DType::kBF16},
        PairCase{"Qwen3MoeTop2Of8Bf16Kv", qwen3_moe_f32_target(48), 1, DType::kBF16},
        PairCase{"GptOssWindow4Top2Of8Bf16Kv", gpt_oss_f32_target(50), 1, DType::kBF16},
        // Drafters whose own config differs from the target's (docs/dflash.md §2.5).
        PairCase{"DrafterSlidingCausalWindow4AndYarn",
                 f32_target(66),
                 2,
                 DType::kF32,
                 {{"layer_types", {"sliding_attention", "full_attention"}},
                  {"use_sliding_window", true},
                  {"sliding_window", 4},
                  {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}}},
                  {"max_position_embeddings", 128}}},
        PairCase{"DrafterSlidingTwoSidedWindow3",
                 f32_target(67),
                 2,
                 DType::kBF16,
                 {{"layer_types", {"sliding_attention", "sliding_attention"}},
                  {"use_sliding_window", true},
                  {"sliding_window", 3},
                  {"is_causal", false}}},
        // DFlash2: the convolution around each sublayer and the selector's drafts.
        PairCase{"Dflash2TwoLayers", f32_target(68), 2, DType::kF32, nlohmann::json::object(), true},
        PairCase{"Dflash2PublishedKeysBf16Kv",
                 f32_target(69),
                 2,
                 DType::kBF16,
                 {{"layer_types", {"sliding_attention", "sliding_attention"}},
                  {"use_sliding_window", true},
                  {"sliding_window", 5},
                  {"is_causal", false},
                  {"output_multiplier", 0.2},
                  {"final_logit_softcapping", 3.0}},
                 true},
        // Hybrids: a rejected draft's rows leave the recurrent state as it was.
        PairCase{"Qwen3_5FourLayers", hybrid_f32_target("qwen3_5", 51), 1},
        PairCase{"Qwen3_5MoeMultimodalEightLayers", hybrid_f32_target("qwen3_5_moe", 52, 8, true), 2},
        PairCase{"Qwen3NextFourLayers", hybrid_f32_target("qwen3_next", 53), 1},
        PairCase{"Qwen3_5FourLayersBf16Kv", hybrid_f32_target("qwen3_5", 54), 1, DType::kBF16}),
    [](const ::testing::TestParamInfo<PairCase>& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace flashq::testing
