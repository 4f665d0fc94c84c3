// The CPU runtime on mixture-of-experts checkpoints against the independent NumPy reference
// (tests/reference/target_reference.py, which reads the family from config.json) on random tiny
// checkpoints: logits of every position, the DFlash taps and the greedy continuation. Qwen3-MoE
// cases cover every layer sparse or some dense (decoder_sparse_step, mlp_only_layers),
// renormalised or raw top-k weights, one to four experts per token, bf16 and f32. Each case
// checks that its routing really spreads rows over several experts and that no row's choice is
// within float noise of a tie (the reference reports the smallest top-k margin), so a routing
// difference cannot hide and a near-tie cannot fail the comparison by chance. gpt-oss cases cover
// MXFP4 experts, sinks, sliding windows over ring caches (and a prompt longer than the ring) and
// YaRN RoPE. Cases named ...Bf16Kv run a bf16 KV cache against the reference's bf16-rounded keys
// and values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "shared/json_file.h"
#include "tests/model/tiny_model.h"
#include "tests/support/reference_files.h"
#include "tests/support/run_command.h"
#include "worker/serving/generate.h"

namespace flashq::testing {
namespace {

struct MoeCase {
  std::string name;
  TinyModelSpec spec;
  DType kv_dtype = DType::kF32;  // the KV cache's; the reference rounds keys and values alike
};

// Logits of every position, the taps of the last and first layer, and 8 greedy tokens of the
// model loaded from `dir` with a `kv_dtype` KV cache, against the reference on the same directory
// with the same cache type.
void expect_matches_numpy(const std::string& name, const std::filesystem::path& dir, TargetModel& model,
                          const TinyModelSpec& spec, DType kv_dtype, size_t length = 21) {
  model.set_kv_cache_dtype(kv_dtype);
  const std::vector<int32_t> tokens =
      some_tokens(length, static_cast<int32_t>(spec.vocab), static_cast<uint32_t>(spec.seed));
  const std::vector<int64_t> taps = {spec.layers - 1, 0};
  const int greedy_steps = 8;
  const std::string prefix = (dir / "reference").string();
  CommandResult ref = run_command("/usr/bin/python3 tests/reference/target_reference.py --model " + dir.string() +
                                  " --tokens " + join(tokens) + " --greedy " + std::to_string(greedy_steps) +
                                  " --taps " + std::to_string(spec.layers - 1) + ",0 --out " + prefix +
                                  (kv_dtype == DType::kBF16 ? " --kv-cache-dtype bf16" : ""));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text_file(prefix + ".json"));
  const nlohmann::json& routing = meta.at("moe");
  EXPECT_GT(routing.at("min_margin").get<double>(), 1e-4) << name << ": a routing this close to a tie tests nothing";
  std::set<int64_t> experts_used;
  for (const auto& layer : routing.at("experts")) {
    for (const auto& row : layer) {
      for (const auto& expert : row) experts_used.insert(expert.get<int64_t>());
    }
  }
  EXPECT_GT(static_cast<int64_t>(experts_used.size()), spec.experts_per_token) << name << ": rows share their experts";

  KvCache cache = model.make_cache(static_cast<int64_t>(length) + 64);
  SequenceChunk chunk{tokens, &cache};
  ForwardOutput out = model.forward({&chunk, 1}, {.logits = LogitRows::kAll, .tap_layers = taps});
  const std::vector<float> logits = to_host(model.backend(), out.logits);
  const std::vector<float> got_taps = to_host(model.backend(), out.taps);
  // bf16 caches: a key or value within float32 noise of a bf16 rounding tie may round one way here
  // and the other in the reference, one bf16 step in one element (about 1e-4 seen); a reference
  // that kept them unrounded is off by 2e-3 or more.
  const double tolerance = kv_dtype == DType::kBF16 ? 5e-4 : 1e-4;
  ASSERT_EQ(got_taps.size(), tokens.size() * 2 * static_cast<size_t>(spec.hidden));
  EXPECT_LT(max_normalized_error(logits, read_f32(prefix + ".logits.f32")), tolerance) << name << ": logits";
  EXPECT_LT(max_normalized_error(got_taps, read_f32(prefix + ".taps.f32")), tolerance) << name << ": taps";

  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  GenerationRequest request;
  request.prompt_tokens = tokens;
  request.max_tokens = greedy_steps;
  request.ignore_eos = true;
  const GenerationResult result = generate(model, *tokenizer, request);
  EXPECT_EQ(result.tokens, meta.at("greedy").get<std::vector<int32_t>>()) << name << ": greedy";
}

TinyModelSpec qwen3_moe(int64_t layers, int64_t experts, int64_t top_k, bool normalize, int64_t sparse_step,
                        std::vector<int64_t> dense_layers, DType dtype, uint64_t seed) {
  TinyModelSpec s;
  s.family = "qwen3-moe";
  s.layers = layers, s.hidden = 64, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.inter = 128, s.vocab = 512;
  s.experts = experts, s.experts_per_token = top_k, s.expert_inter = 32, s.norm_topk_prob = normalize;
  s.sparse_step = sparse_step, s.dense_layers = std::move(dense_layers);
  s.dtype = dtype, s.seed = seed;
  return s;
}

// gpt-oss: MXFP4 experts, sinks, sliding layers of `window` over ring caches, YaRN over an
// original context of 16 (so the scaling blends the middle pairs at these lengths).
TinyModelSpec gpt_oss(int64_t layers, int64_t experts, int64_t top_k, int64_t window, uint64_t seed) {
  TinyModelSpec s;
  s.family = "gpt-oss";
  s.layers = layers, s.hidden = 64, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.inter = 64, s.vocab = 512;
  s.experts = experts, s.experts_per_token = top_k, s.sliding_window = window;
  s.rope_theta = 150000, s.yarn_factor = 32, s.original_max_position = 16;
  s.dtype = DType::kBF16, s.seed = seed;
  return s;
}

class MoeReferenceNumerics : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeReferenceNumerics, LogitsTapsAndGreedyContinuationMatchNumpy) {
  const TinyModelSpec& spec = GetParam().spec;
  LoadedTinyModel tiny(spec);
  expect_matches_numpy(GetParam().name, tiny.dir.path(), *tiny.model, spec, GetParam().kv_dtype);
}

INSTANTIATE_TEST_SUITE_P(
    TinyMoeTargets, MoeReferenceNumerics,
    ::testing::Values(
        MoeCase{"Qwen3MoeTop2Of8Bf16", qwen3_moe(2, 8, 2, true, 1, {}, DType::kBF16, 61)},
        MoeCase{"Qwen3MoeTop4Of16F32EveryOtherLayerOneDenseRaw", qwen3_moe(4, 16, 4, false, 2, {3}, DType::kF32, 62)},
        MoeCase{"Qwen3MoeTop1Of4Bf16DenseFirstLayer", qwen3_moe(3, 4, 1, true, 1, {0}, DType::kBF16, 63)},
        MoeCase{"Qwen3MoeTop2Of8Bf16Bf16Kv", qwen3_moe(2, 8, 2, true, 1, {}, DType::kBF16, 61), DType::kBF16},
        MoeCase{"Qwen3MoeTop4Of16F32EveryOtherLayerOneDenseRawBf16Kv",
                qwen3_moe(4, 16, 4, false, 2, {3}, DType::kF32, 62), DType::kBF16}),
    [](const ::testing::TestParamInfo<MoeCase>& param_info) { return param_info.param.name; });

INSTANTIATE_TEST_SUITE_P(TinyGptOssTargets, MoeReferenceNumerics,
                         ::testing::Values(MoeCase{"GptOssTop2Of8Window4", gpt_oss(4, 8, 2, 4, 71)},
                                           MoeCase{"GptOssTop4Of16Window8ThreeLayers", gpt_oss(3, 16, 4, 8, 72)},
                                           MoeCase{"GptOssTop2Of8Window4Bf16Kv", gpt_oss(4, 8, 2, 4, 71),
                                                   DType::kBF16}),
                         [](const ::testing::TestParamInfo<MoeCase>& param_info) { return param_info.param.name; });

// A prompt longer than a sliding layer's ring (window + KvCache::kMaxRowsPerPass rows): the
// prefill runs in parts, the ring wraps, and every position's logits and the greedy tokens that
// follow still match the reference, with f32 and bf16 rings.
TEST(GptOssRingCaches, APromptLongerThanTheRingMatchesNumpy) {
  const TinyModelSpec spec = gpt_oss(2, 8, 2, 4, 73);
  LoadedTinyModel tiny(spec);
  const size_t length = static_cast<size_t>(4 + KvCache::kMaxRowsPerPass + 40);
  expect_matches_numpy("long prompt", tiny.dir.path(), *tiny.model, spec, DType::kF32, length);
  expect_matches_numpy("long prompt, bf16 KV", tiny.dir.path(), *tiny.model, spec, DType::kBF16, length);
  KvCache cache = tiny.model->make_cache(static_cast<int64_t>(length) + 64);
  EXPECT_EQ(cache.ring_rows(), 4 + KvCache::kMaxRowsPerPass);
  EXPECT_TRUE(cache.ring(0));
  EXPECT_FALSE(cache.ring(1));
}

// A chunk run in parts is refused whole: a bad token in its last part leaves the cache untouched.
TEST(GptOssRingCaches, ABadTokenInALaterPartChangesNoCache) {
  const TinyModelSpec spec = gpt_oss(2, 8, 2, 4, 74);
  LoadedTinyModel tiny(spec);
  tiny.model->set_kv_cache_dtype(DType::kF32);  // the reference keeps keys and values as computed
  std::vector<int32_t> tokens = some_tokens(static_cast<size_t>(KvCache::kMaxRowsPerPass) + 10, 300, 74);
  tokens.back() = static_cast<int32_t>(spec.vocab);
  KvCache cache = tiny.model->make_cache(1000);
  SequenceChunk chunk{tokens, &cache};
  try {
    tiny.model->forward({&chunk, 1}, {.logits = LogitRows::kLastOfEachChunk});
    FAIL() << "a token outside the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
  EXPECT_EQ(cache.length(), 0);
}

}  // namespace
}  // namespace flashq::testing
