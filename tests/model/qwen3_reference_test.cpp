// The CPU runtime against the independent NumPy reference (tests/reference/qwen3_reference.py)
// on random tiny checkpoints of several shapes: logits of every position, the DFlash taps and
// the greedy continuation.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/model/tiny_model.h"
#include "tests/support/reference_files.h"
#include "tests/support/run_command.h"
#include "shared/json_file.h"
#include "worker/serving/generate.h"

namespace flashq::testing {
namespace {

struct ReferenceCase {
  std::string name;
  TinyModelSpec spec;
  DType kv_dtype = DType::kF32;  // the KV cache's; the reference rounds keys and values alike
};

TinyModelSpec make_spec(int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim,
                        int64_t inter, int64_t vocab, bool tie, DType dtype, double theta, uint64_t seed) {
  TinyModelSpec s;
  s.layers = layers, s.hidden = hidden, s.heads = heads, s.kv_heads = kv_heads, s.head_dim = head_dim;
  s.inter = inter, s.vocab = vocab, s.tie_embeddings = tie, s.dtype = dtype, s.rope_theta = theta, s.seed = seed;
  return s;
}

class ReferenceNumerics : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(ReferenceNumerics, LogitsTapsAndGreedyContinuationMatchNumpy) {
  const TinyModelSpec& spec = GetParam().spec;
  LoadedTinyModel tiny(spec);
  TargetModel& model = *tiny.model;
  const bool bf16_kv = GetParam().kv_dtype == DType::kBF16;
  model.set_kv_cache_dtype(GetParam().kv_dtype);
  const int64_t layers = spec.layers, hidden = spec.hidden;
  std::vector<int32_t> tokens = some_tokens(19, static_cast<int32_t>(spec.vocab), static_cast<uint32_t>(spec.seed));
  const std::vector<int64_t> taps = {0, layers - 1};
  const int greedy_steps = 8;

  std::filesystem::path prefix = tiny.dir / "reference";
  CommandResult ref = run_command("/usr/bin/python3 tests/reference/qwen3_reference.py --model " +
                                  tiny.dir.path().string() + " --tokens " + join(tokens) + " --greedy " +
                                  std::to_string(greedy_steps) + " --taps 0," + std::to_string(layers - 1) +
                                  " --out " + prefix.string() + (bf16_kv ? " --kv-cache-dtype bf16" : ""));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  std::vector<float> want_logits = read_f32(prefix.string() + ".logits.f32");
  std::vector<float> want_taps = read_f32(prefix.string() + ".taps.f32");
  nlohmann::json meta = nlohmann::json::parse(read_text_file(prefix.string() + ".json"));

  KvCache cache = model.make_cache(64);
  SequenceChunk chunk{tokens, &cache};
  ForwardOutput out = model.forward({&chunk, 1}, {.logits = LogitRows::kAll, .tap_layers = taps});
  std::vector<float> logits = to_host(model.backend(), out.logits);
  std::vector<float> got_taps = to_host(model.backend(), out.taps);
  ASSERT_EQ(got_taps.size(), tokens.size() * 2 * static_cast<size_t>(hidden));
  EXPECT_LT(max_normalized_error(logits, want_logits), 1e-4) << GetParam().name << ": logits";
  EXPECT_LT(max_normalized_error(got_taps, want_taps), 1e-4) << GetParam().name << ": taps";

  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(tiny.dir.path());
  GenerationRequest request;
  request.prompt_tokens = tokens;
  request.max_tokens = greedy_steps;
  request.ignore_eos = true;
  GenerationResult result = generate(model, *tokenizer, request);
  EXPECT_EQ(result.tokens, meta.at("greedy").get<std::vector<int32_t>>()) << GetParam().name << ": greedy";
}

INSTANTIATE_TEST_SUITE_P(
    TinyModels, ReferenceNumerics,
    ::testing::Values(
        ReferenceCase{"GqaBf16Untied", make_spec(2, 64, 4, 2, 16, 128, 512, false, DType::kBF16, 1e6, 21)},
        ReferenceCase{"MhaF32Tied", make_spec(3, 48, 4, 4, 24, 100, 400, true, DType::kF32, 1e6, 22)},
        ReferenceCase{"OddSizesF16", make_spec(2, 40, 6, 3, 10, 72, 333, false, DType::kF16, 1e4, 23)},
        ReferenceCase{"OneKvHeadBf16Tied", make_spec(4, 32, 8, 1, 8, 64, 320, true, DType::kBF16, 5e5, 24)},
        ReferenceCase{"GqaBf16UntiedBf16Kv", make_spec(2, 64, 4, 2, 16, 128, 512, false, DType::kBF16, 1e6, 21),
                      DType::kBF16},
        ReferenceCase{"MhaF32TiedBf16Kv", make_spec(3, 48, 4, 4, 24, 100, 400, true, DType::kF32, 1e6, 22),
                      DType::kBF16}),
    [](const ::testing::TestParamInfo<ReferenceCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace flashq::testing
