// The CPU runtime on the hybrid families (Qwen3.5, Qwen3.5-MoE, Qwen3-Next) against the
// independent NumPy reference (tests/reference/qwen3_5_reference.py through target_reference.py)
// on random tiny checkpoints written by tests/reference/make_hybrid_checkpoint.py in the published
// layouts: the multimodal one (model.language_model.*, text_config, vision and MTP tensors
// skipped) and the text-only ones, Qwen3.5's four input projections and Qwen3-Next's grouped
// ones, fused and per-expert experts with the shared expert. Checked: logits of every position
// of a prompt (the reference's chunked delta rule against the backend's recurrent one), the taps,
// greedy tokens decoded one by one from the recurrent state, and a prompt run in two passes
// equal to one; the same with the prefill in the chunked form. A verification-like pass truncated
// into and continued matches the reference too.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "shared/json_file.h"
#include "tests/model/tiny_model.h"
#include "tests/support/reference_files.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "worker/model/model_registry.h"

namespace flashq::testing {
namespace {

struct HybridCase {
  std::string name;
  std::string family;   // make_hybrid_checkpoint's
  std::string options;  // Python keyword arguments of make_checkpoint
  int64_t layers = 4;
  DType kv_dtype = DType::kF32;
  // Written by flashq-model make-tiny from this spec instead, when its family is a hybrid one.
  TinyModelSpec tiny = {.family = ""};
};

void PrintTo(const HybridCase& c, std::ostream* os) { *os << c.name; }

// Writes the case's checkpoint into `dir`.
void write_checkpoint(const HybridCase& c, const std::filesystem::path& dir) {
  if (!c.tiny.family.empty()) return write_tiny_model(c.tiny, dir);
  const std::string script =
      "import sys; sys.path.insert(0, 'tests/reference'); import make_hybrid_checkpoint as m; "
      "m.make_checkpoint('" +
      c.family + "', '" + dir.string() + "', num_layers=" + std::to_string(c.layers) +
      (c.options.empty() ? "" : ", " + c.options) + ")";
  const CommandResult made = run_command("/usr/bin/python3 -c \"" + script + "\"");
  ASSERT_EQ(made.exit_code, 0) << made.output;
}

struct Reference {
  std::vector<float> logits, taps;
  std::vector<int32_t> greedy;
};

Reference run_reference(const std::filesystem::path& dir, const std::vector<int32_t>& tokens, int64_t layers,
                        int greedy, DType kv_dtype) {
  const std::string prefix = (dir / "reference").string();
  const CommandResult ref =
      run_command("/usr/bin/python3 tests/reference/target_reference.py --model " + dir.string() + " --tokens " +
                  join(tokens) + " --greedy " + std::to_string(greedy) + " --taps " + std::to_string(layers - 1) +
                  ",0 --out " + prefix + (kv_dtype == DType::kBF16 ? " --kv-cache-dtype bf16" : ""));
  EXPECT_EQ(ref.exit_code, 0) << ref.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text_file(prefix + ".json"));
  return {read_f32(prefix + ".logits.f32"), read_f32(prefix + ".taps.f32"),
          meta.at("greedy").get<std::vector<int32_t>>()};
}

int32_t argmax_row(const std::vector<float>& logits, size_t row, size_t vocab) {
  const auto begin = logits.begin() + static_cast<std::ptrdiff_t>(row * vocab);
  return static_cast<int32_t>(std::max_element(begin, begin + static_cast<std::ptrdiff_t>(vocab)) - begin);
}

// Greedy tokens decoded one pass a token on `cache`, which holds the prompt; `first` is the
// prompt's next token.
std::vector<int32_t> decode_greedy(TargetModel& model, KvCache& cache, int32_t first, int steps) {
  std::vector<int32_t> out{first};
  const auto vocab = static_cast<size_t>(model.config().vocab_size);
  while (static_cast<int>(out.size()) < steps) {
    SequenceChunk chunk{std::span<const int32_t>(&out.back(), 1), &cache};
    const std::vector<float> logits = to_host(model.backend(), model.forward({&chunk, 1}, {}).logits);
    out.push_back(argmax_row(logits, 0, vocab));
  }
  return out;
}

// The case's checkpoint written and loaded, its caches of the case's element type.
class HybridReference : public ::testing::TestWithParam<HybridCase> {
 protected:
  void SetUp() override {
    write_checkpoint(GetParam(), dir.path());
    model = load_target_model(dir.path(), *backend);
    model->set_kv_cache_dtype(GetParam().kv_dtype);
    vocab = static_cast<int32_t>(model->config().vocab_size);
    tolerance = GetParam().kv_dtype == DType::kBF16 ? 5e-4 : 1e-4;
  }

  TempDir dir;
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<TargetModel> model;
  int32_t vocab = 0;
  double tolerance = 0;
};

TEST_P(HybridReference, LogitsTapsAndGreedyDecodingMatchNumpy) {
  const HybridCase& c = GetParam();
  const std::vector<int32_t> tokens = some_tokens(21, vocab, 5);
  const int greedy = 8;
  const Reference ref = run_reference(dir.path(), tokens, c.layers, greedy, c.kv_dtype);

  KvCache cache = model->make_cache(64);
  ASSERT_NE(cache.recurrent(), nullptr);
  SequenceChunk chunk{tokens, &cache};
  const ForwardOutput out = model->forward({&chunk, 1}, {.logits = LogitRows::kAll, .tap_layers = {c.layers - 1, 0}});
  const std::vector<float> logits = to_host(*backend, out.logits);
  EXPECT_LT(max_normalized_error(logits, ref.logits), tolerance) << "logits";
  EXPECT_LT(max_normalized_error(to_host(*backend, out.taps), ref.taps), tolerance) << "taps";
  const int32_t next = argmax_row(logits, tokens.size() - 1, static_cast<size_t>(vocab));
  EXPECT_EQ(decode_greedy(*model, cache, next, greedy), ref.greedy);

  // The prompt in two passes (the state carried between them) ends where one pass does.
  KvCache split = model->make_cache(64);
  const std::span<const int32_t> all(tokens);
  SequenceChunk head{all.first(13), &split};
  model->forward({&head, 1}, {.logits = LogitRows::kNone});
  SequenceChunk tail{all.subspan(13), &split};
  const std::vector<float> last = to_host(*backend, model->forward({&tail, 1}, {}).logits);
  const std::vector<float> want(ref.logits.end() - vocab, ref.logits.end());
  EXPECT_LT(max_normalized_error(last, want), tolerance) << "two passes";
}

// A prefill in the delta rule's chunked form (TargetModel::DeltaRuleForm::kChunked, what a GPU
// runs): a prompt of two chunks (64 rows, then 6) and one of a single chunk cut short end where the
// reference does, and greedy decoding (the recurrent form) continues from the state it left.
TEST_P(HybridReference, AChunkedPrefillMatchesNumpyAndDecodingContinuesFromItsState) {
  const HybridCase& c = GetParam();
  model->set_delta_rule_form(TargetModel::DeltaRuleForm::kChunked);
  const std::vector<int32_t> tokens = some_tokens(70, vocab, 6);
  const int greedy = 4;
  const Reference ref = run_reference(dir.path(), tokens, c.layers, greedy, c.kv_dtype);
  KvCache cache = model->make_cache(96);
  SequenceChunk chunk{tokens, &cache};
  const std::vector<float> logits = to_host(*backend, model->forward({&chunk, 1}, {.logits = LogitRows::kAll}).logits);
  EXPECT_LT(max_normalized_error(logits, ref.logits), tolerance) << "logits";
  const int32_t next = argmax_row(logits, tokens.size() - 1, static_cast<size_t>(vocab));
  EXPECT_EQ(decode_greedy(*model, cache, next, greedy), ref.greedy);

  KvCache short_prompt = model->make_cache(96);
  SequenceChunk first{std::span<const int32_t>(tokens).first(30), &short_prompt};
  const std::vector<float> last = to_host(*backend, model->forward({&first, 1}, {}).logits);
  const std::vector<float> want(ref.logits.begin() + 29 * vocab, ref.logits.begin() + 30 * vocab);
  EXPECT_LT(max_normalized_error(last, want), tolerance) << "a prompt of one chunk cut short";
}

// A pass of 6 rows (as a verification block is) truncated to keep 2 of them, then continued: the
// state is the one after the kept rows, so the next pass's logits are the reference's for the
// prompt and the kept rows. Then truncating to the pass's start keeps none, and to its end all.
TEST_P(HybridReference, ATruncatedPassLeavesTheStateOfItsKeptRows) {
  const HybridCase& c = GetParam();
  const std::vector<int32_t> tokens = some_tokens(24, vocab, 9);
  const Reference ref = run_reference(dir.path(), tokens, c.layers, 1, c.kv_dtype);
  const std::span<const int32_t> all(tokens);
  for (const int64_t kept : {2, 0, 6}) {
    KvCache cache = model->make_cache(64);
    SequenceChunk prompt{all.first(12), &cache};
    model->forward({&prompt, 1}, {.logits = LogitRows::kNone});
    // The block: the next 6 tokens, of which `kept` are kept; the rest are replaced.
    SequenceChunk block{all.subspan(12, 6), &cache};
    model->forward({&block, 1}, {.logits = LogitRows::kAll});
    cache.truncate(12 + kept);
    SequenceChunk rest{all.subspan(static_cast<size_t>(12 + kept)), &cache};
    const std::vector<float> logits = to_host(*backend, model->forward({&rest, 1}, {.logits = LogitRows::kAll}).logits);
    const std::vector<float> want(ref.logits.begin() + (12 + kept) * vocab, ref.logits.end());
    EXPECT_LT(max_normalized_error(logits, want), tolerance) << "kept " << kept;
  }
}

INSTANTIATE_TEST_SUITE_P(TinyHybridTargets, HybridReference,
                         ::testing::Values(HybridCase{"Qwen3_5TextOnlyF32", "qwen3_5", "dtype='F32'"},
                                           HybridCase{"Qwen3_5MultimodalBf16", "qwen3_5", "multimodal=True, seed=3"},
                                           HybridCase{"Qwen3_5EightLayersTiedBiasBf16Kv", "qwen3_5",
                                                      "seed=4, tied=True, attention_bias=True", 8, DType::kBF16},
                                           HybridCase{"Qwen3_5MoeMultimodal", "qwen3_5_moe", "multimodal=True, seed=5"},
                                           HybridCase{"Qwen3_5MoeTextOnlyF32", "qwen3_5_moe", "dtype='F32', seed=6"},
                                           HybridCase{"Qwen3NextF32", "qwen3_next", "dtype='F32', seed=7"},
                                           HybridCase{"Qwen3NextDenseLayerRawTopK", "qwen3_next",
                                                      "seed=8, mlp_only_layers=(1,), norm_topk_prob=False", 5}),
                         [](const ::testing::TestParamInfo<HybridCase>& param_info) { return param_info.param.name; });

// make-tiny's hybrid checkpoints (what the engine tests and benchmarks run) read by the reference.
TinyModelSpec tiny_hybrid(const std::string& family, bool multimodal, uint64_t seed) {
  TinyModelSpec s;
  s.family = family, s.layers = 4, s.hidden = 64, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.inter = 96;
  s.vocab = 320, s.experts = 6, s.experts_per_token = 2, s.expert_inter = 24, s.shared_expert_inter = 32;
  s.multimodal = multimodal, s.dtype = DType::kF32, s.seed = seed;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    MakeTinyHybridTargets, HybridReference,
    ::testing::Values(HybridCase{.name = "Qwen3_5", .tiny = tiny_hybrid("qwen3_5", false, 11)},
                      HybridCase{.name = "Qwen3_5MoeMultimodal", .tiny = tiny_hybrid("qwen3_5_moe", true, 12)},
                      HybridCase{.name = "Qwen3Next", .tiny = tiny_hybrid("qwen3_next", false, 13)}),
    [](const ::testing::TestParamInfo<HybridCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace flashq::testing
