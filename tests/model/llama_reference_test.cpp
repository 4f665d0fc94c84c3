// The CPU runtime on Llama 3.x checkpoints against the independent NumPy reference
// (tests/reference/llama_reference.py) on random tiny checkpoints of several shapes: logits of
// every position, the DFlash taps and the greedy continuation. The shapes cover GQA/MHA/MQA,
// attention and MLP biases, tied and untied embeddings, bf16 and f32, and Llama 3 RoPE scaling
// with an original context small enough that the scaling changes the logits at these lengths;
// linear scaling and the older "type" spelling from an edited config.json, and "dynamic" refused.
// Cases named ...Bf16Kv run a bf16 KV cache against the reference's bf16-rounded keys and values.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shared/json_file.h"
#include "tests/model/tiny_model.h"
#include "tests/support/reference_files.h"
#include "tests/support/run_command.h"
#include "worker/serving/generate.h"

namespace flashq::testing {
namespace {

struct Shape {
  int64_t layers, hidden, heads, kv_heads, head_dim, inter, vocab;
};
struct Biases {
  bool attention, mlp;
};
// factor 0: plain RoPE; otherwise llama3 scaling with these factors and original context.
struct Llama3Rope {
  double factor = 0, low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_position = 8192;
};

TinyModelSpec llama_spec(Shape shape, Biases biases, Llama3Rope rope, bool tie, DType dtype, double theta,
                         uint64_t seed) {
  TinyModelSpec s;
  s.family = "llama";
  s.layers = shape.layers, s.hidden = shape.hidden, s.heads = shape.heads, s.kv_heads = shape.kv_heads;
  s.head_dim = shape.head_dim, s.inter = shape.inter, s.vocab = shape.vocab;
  s.attention_bias = biases.attention, s.mlp_bias = biases.mlp;
  s.rope_scaling_factor = rope.factor, s.low_freq_factor = rope.low_freq_factor;
  s.high_freq_factor = rope.high_freq_factor, s.original_max_position = rope.original_max_position;
  s.tie_embeddings = tie, s.dtype = dtype, s.rope_theta = theta, s.seed = seed;
  return s;
}

struct ReferenceCase {
  std::string name;
  TinyModelSpec spec;
  DType kv_dtype = DType::kF32;  // the KV cache's; the reference rounds keys and values alike
};

class LlamaReferenceNumerics : public ::testing::TestWithParam<ReferenceCase> {};

// The checkpoint states what the case is about, so a writer that dropped a field cannot make the
// comparison pass on an easier model.
void expect_config_states(const TinyModelSpec& spec, const std::filesystem::path& dir) {
  nlohmann::json config = nlohmann::json::parse(read_text_file(dir / "config.json"));
  EXPECT_EQ(config.value("model_type", ""), "llama");
  EXPECT_EQ(config.value("attention_bias", false), spec.attention_bias);
  EXPECT_EQ(config.value("mlp_bias", false), spec.mlp_bias);
  const nlohmann::json rope =
      config.contains("rope_parameters") ? config["rope_parameters"] : config.value("rope_scaling", nlohmann::json());
  if (spec.rope_scaling_factor > 0) {
    ASSERT_TRUE(rope.is_object()) << config.dump();
    EXPECT_EQ(rope.value("rope_type", rope.value("type", "")), "llama3");
    EXPECT_EQ(rope.value("factor", 0.0), spec.rope_scaling_factor);
    EXPECT_EQ(rope.value("original_max_position_embeddings", int64_t{0}), spec.original_max_position);
  } else {
    EXPECT_TRUE(rope.is_null() || rope.value("rope_type", rope.value("type", "default")) == "default") << config.dump();
  }
}

// Logits of every position, the taps of the last and first layer, and 8 greedy tokens of the
// model loaded from `dir` with a `kv_dtype` KV cache, against llama_reference.py on the same
// directory with the same cache type.
void expect_matches_numpy(const std::string& name, const std::filesystem::path& dir, TargetModel& model, int64_t layers,
                          int64_t hidden, int64_t vocab, uint32_t seed, DType kv_dtype = DType::kF32) {
  model.set_kv_cache_dtype(kv_dtype);
  std::vector<int32_t> tokens = some_tokens(21, static_cast<int32_t>(vocab), seed);
  const std::vector<int64_t> taps = {layers - 1, 0};  // list order, not layer order
  const int greedy_steps = 8;

  const std::string prefix = (dir / "reference").string();
  CommandResult ref =
      run_command("/usr/bin/python3 tests/reference/llama_reference.py --model " + dir.string() + " --tokens " +
                  join(tokens) + " --greedy " + std::to_string(greedy_steps) + " --taps " + std::to_string(layers - 1) +
                  ",0 --out " + prefix + (kv_dtype == DType::kBF16 ? " --kv-cache-dtype bf16" : ""));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  std::vector<float> want_logits = read_f32(prefix + ".logits.f32");
  std::vector<float> want_taps = read_f32(prefix + ".taps.f32");
  nlohmann::json meta = nlohmann::json::parse(read_text_file(prefix + ".json"));

  KvCache cache = model.make_cache(64);
  SequenceChunk chunk{tokens, &cache};
  ForwardOutput out = model.forward({&chunk, 1}, {.logits = LogitRows::kAll, .tap_layers = taps});
  std::vector<float> logits = to_host(model.backend(), out.logits);
  std::vector<float> got_taps = to_host(model.backend(), out.taps);
  // bf16 caches: a key or value within float32 noise of a bf16 rounding tie may round one way here
  // and the other in the reference, one bf16 step in one element (about 1e-4 seen); a reference
  // that kept them unrounded is off by 2e-3 or more.
  const double tolerance = kv_dtype == DType::kBF16 ? 5e-4 : 1e-4;
  ASSERT_EQ(got_taps.size(), tokens.size() * 2 * static_cast<size_t>(hidden));
  EXPECT_LT(max_normalized_error(logits, want_logits), tolerance) << name << ": logits";
  EXPECT_LT(max_normalized_error(got_taps, want_taps), tolerance) << name << ": taps";

  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  GenerationRequest request;
  request.prompt_tokens = tokens;
  request.max_tokens = greedy_steps;
  request.ignore_eos = true;
  GenerationResult result = generate(model, *tokenizer, request);
  EXPECT_EQ(result.tokens, meta.at("greedy").get<std::vector<int32_t>>()) << name << ": greedy";
}

TEST_P(LlamaReferenceNumerics, LogitsTapsAndGreedyContinuationMatchNumpy) {
  const TinyModelSpec& spec = GetParam().spec;
  LoadedTinyModel tiny(spec);
  expect_config_states(spec, tiny.dir.path());
  expect_matches_numpy(GetParam().name, tiny.dir.path(), *tiny.model, spec.layers, spec.hidden, spec.vocab,
                       static_cast<uint32_t>(spec.seed), GetParam().kv_dtype);
}

// Llama 3 scaling with original context 16 and theta 1e4, head_dim 16: pair wavelengths are
// 2 pi 1e4^(i/8) = 6.3, 19.9, 63, 199, ...: pair 0 kept, pair 1 blended, pairs 2.. divided by
// the factor; 21 tokens turn the divided pairs by visibly different angles.
const Llama3Rope kShortContext{.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_position = 16};
// The Llama 3.1/3.2 factors (32 as in 3.2) with an original context of 64 at theta 500000.
const Llama3Rope kLlama32Like{.factor = 32, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_position = 64};

INSTANTIATE_TEST_SUITE_P(
    TinyLlamas, LlamaReferenceNumerics,
    ::testing::Values(
        ReferenceCase{"GqaBf16UntiedLlama3", llama_spec({2, 64, 4, 2, 16, 128, 512}, {false, false}, kLlama32Like,
                                                        false, DType::kBF16, 5e5, 31)},
        ReferenceCase{"MhaF32TiedBothBiasesPlainRope",
                      llama_spec({3, 48, 4, 4, 12, 100, 400}, {true, true}, {}, true, DType::kF32, 1e4, 32)},
        ReferenceCase{"OneKvHeadBf16AttentionBiasLlama3", llama_spec({2, 64, 8, 1, 16, 96, 333}, {true, false},
                                                                     kShortContext, false, DType::kBF16, 1e4, 33)},
        ReferenceCase{"GqaF32TiedMlpBiasLlama3",
                      llama_spec({4, 32, 4, 2, 8, 64, 320}, {false, true}, kShortContext, true, DType::kF32, 1e4, 34)},
        ReferenceCase{"MhaBf16UntiedOddSizesBothBiasesLlama3",
                      llama_spec({2, 40, 5, 5, 8, 72, 333}, {true, true}, kShortContext, false, DType::kBF16, 1e4, 35)},
        ReferenceCase{
            "GqaBf16UntiedLlama3Bf16Kv",
            llama_spec({2, 64, 4, 2, 16, 128, 512}, {false, false}, kLlama32Like, false, DType::kBF16, 5e5, 31),
            DType::kBF16},
        ReferenceCase{"MhaF32TiedBothBiasesPlainRopeBf16Kv",
                      llama_spec({3, 48, 4, 4, 12, 100, 400}, {true, true}, {}, true, DType::kF32, 1e4, 32),
                      DType::kBF16}),
    [](const ::testing::TestParamInfo<ReferenceCase>& param_info) { return param_info.param.name; });

// Checkpoints whose RoPE kind make-tiny does not write: a tiny Llama directory whose config.json
// is then given the rope_scaling a published checkpoint could hold, read by both sides.
class LlamaRopeFromConfig : public ::testing::Test {
 protected:
  LlamaRopeFromConfig() {
    spec_ = llama_spec({2, 64, 4, 2, 16, 128, 400}, {true, false}, {}, false, DType::kF32, 1e4, 36);
    write_tiny_model(spec_, dir_.path());
  }
  void set_rope_scaling(const nlohmann::json& rope_scaling) {
    nlohmann::json config = nlohmann::json::parse(read_text_file(dir_.path() / "config.json"));
    config.erase("rope_parameters");
    config["rope_scaling"] = rope_scaling;
    write_text_file(dir_.path() / "config.json", config.dump(1));
  }

  TinyModelSpec spec_;
  TempDir dir_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend();
};

TEST_F(LlamaRopeFromConfig, LinearScalingMatchesNumpy) {
  set_rope_scaling({{"rope_type", "linear"}, {"factor", 4.0}});
  std::unique_ptr<TargetModel> model = load_target_model(dir_.path(), *backend_);
  expect_matches_numpy("linear", dir_.path(), *model, spec_.layers, spec_.hidden, spec_.vocab, 36);
}

TEST_F(LlamaRopeFromConfig, OlderLlama3SpellingMatchesNumpy) {
  // "type" instead of "rope_type", as configs written by older transformers have it.
  set_rope_scaling({{"type", "llama3"},
                    {"factor", 8.0},
                    {"low_freq_factor", 1.0},
                    {"high_freq_factor", 4.0},
                    {"original_max_position_embeddings", 16}});
  std::unique_ptr<TargetModel> model = load_target_model(dir_.path(), *backend_);
  expect_matches_numpy("llama3 (type)", dir_.path(), *model, spec_.layers, spec_.hidden, spec_.vocab, 37);
}

// YaRN as gpt-oss states it (factor, betas, truncate false) with an original context of 256 at
// theta 1e4 and head_dim 16: pairs 0-3 blend, the rest are divided by the factor, and cos and
// sin grow by 0.1 ln 8 + 1; the NumPy reference reads the same keys (rope_reference.py).
TEST_F(LlamaRopeFromConfig, YarnScalingMatchesNumpy) {
  set_rope_scaling({{"rope_type", "yarn"},
                    {"factor", 8.0},
                    {"beta_fast", 32.0},
                    {"beta_slow", 1.0},
                    {"original_max_position_embeddings", 256},
                    {"truncate", false}});
  std::unique_ptr<TargetModel> model = load_target_model(dir_.path(), *backend_);
  expect_matches_numpy("yarn", dir_.path(), *model, spec_.layers, spec_.hidden, spec_.vocab, 38);
}

// YaRN's defaults (betas 32 and 1, truncate true, the original context from
// max_position_embeddings) with an attention factor given.
TEST_F(LlamaRopeFromConfig, YarnDefaultsWithAGivenAttentionFactorMatchNumpy) {
  set_rope_scaling({{"type", "yarn"}, {"factor", 4.0}, {"attention_factor", 1.2}});
  std::unique_ptr<TargetModel> model = load_target_model(dir_.path(), *backend_);
  expect_matches_numpy("yarn (defaults)", dir_.path(), *model, spec_.layers, spec_.hidden, spec_.vocab, 39);
}

TEST_F(LlamaRopeFromConfig, DynamicScalingIsRefusedByName) {
  set_rope_scaling({{"rope_type", "dynamic"}, {"factor", 2.0}});
  try {
    load_target_model(dir_.path(), *backend_);
    FAIL() << "a dynamic rope_scaling was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("dynamic"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashq::testing
