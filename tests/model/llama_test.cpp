// A random Llama checkpoint as make-tiny writes it (tied or untied, with and without attention
// and MLP biases, llama3 RoPE scaling) loads through the registry and keeps the KV-cache
// invariants; the options it names are read from its files and change the logits: a bias tensor
// config.json does not name, or a named one missing, is refused; the RoPE scaling factor moves
// the logits of late positions and not of position 0 (where RoPE is the identity).
// The logits themselves are checked against the independent NumPy reference elsewhere.
#include <gtest/gtest.h>

#include "shared/json_file.h"
#include "tests/model/tiny_model.h"
#include "worker/model/safetensors.h"

namespace flashq::testing {
namespace {

TinyModelSpec llama_spec(bool biases, bool tie, double scaling_factor) {
  TinyModelSpec spec;
  spec.family = "llama";
  spec.layers = 2, spec.hidden = 48, spec.heads = 4, spec.kv_heads = 2, spec.head_dim = 16, spec.inter = 96;
  spec.vocab = 400, spec.dtype = DType::kF32, spec.seed = 23, spec.rope_theta = 500000.0;
  spec.attention_bias = biases, spec.mlp_bias = biases, spec.tie_embeddings = tie;
  // A short original context so that the tiny head_dim has low, medium and high frequencies.
  spec.rope_scaling_factor = scaling_factor, spec.original_max_position = 64;
  return spec;
}

std::vector<float> forward_all(TargetModel& model, std::span<const int32_t> tokens, KvCache& cache) {
  SequenceChunk chunk{tokens, &cache};
  ForwardOutput out = model.forward({&chunk, 1}, {.logits = LogitRows::kAll});
  return to_host(model.backend(), out.logits);
}

std::vector<float> rows(const std::vector<float>& logits, int64_t vocab, int64_t first, int64_t count) {
  return {logits.begin() + first * vocab, logits.begin() + (first + count) * vocab};
}

ErrorCode load_error(const std::filesystem::path& dir, std::string* message) {
  auto backend = make_cpu_backend();
  try {
    load_target_model(dir, *backend);
  } catch (const Error& e) {
    *message = e.what();
    return e.code();
  }
  return ErrorCode::kInternal;
}

TEST(LlamaModel, LoadsAsTheLlamaFamilyWithTheOptionsItsConfigNames) {
  LoadedTinyModel tiny(llama_spec(/*biases=*/true, /*tie=*/false, 8.0));
  const ModelConfig& c = tiny.model->config();
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(c.rope_factor, 8.0);
  EXPECT_EQ(c.rope_original_max_position, 64);
  const WeightStore weights = WeightStore::open(tiny.dir.path());
  EXPECT_TRUE(weights.contains("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_TRUE(weights.contains("model.layers.1.mlp.down_proj.bias"));
  EXPECT_FALSE(weights.contains("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_TRUE(weights.contains("lm_head.weight"));
}

TEST(LlamaModel, TiedEmbeddingsNeedNoLmHead) {
  LoadedTinyModel tiny(llama_spec(false, /*tie=*/true, 32.0));
  EXPECT_FALSE(WeightStore::open(tiny.dir.path()).contains("lm_head.weight"));
  EXPECT_EQ(tiny.model->lm_head().raw(), tiny.model->embedding_table().raw());
}

// However the tokens are split into passes, with biases and scaling on, the logits agree.
TEST(LlamaModel, DecodeStepByStepEqualsOneFullForwardWithBiasesAndScaling) {
  for (bool biases : {false, true}) {
    LoadedTinyModel tiny(llama_spec(biases, false, 8.0));
    TargetModel& model = *tiny.model;
    const int64_t vocab = model.config().vocab_size;
    const std::vector<int32_t> tokens = some_tokens(12, 400, 1);
    KvCache full_cache = model.make_cache(64);
    const std::vector<float> full = forward_all(model, tokens, full_cache);
    KvCache step_cache = model.make_cache(64);
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::vector<float> step = forward_all(model, std::span(tokens).subspan(i, 1), step_cache);
      EXPECT_LT(max_normalized_error(step, rows(full, vocab, static_cast<int64_t>(i), 1)), 1e-5)
          << "biases " << biases << " position " << i;
    }
  }
}

TEST(LlamaModel, BatchedSequencesWithBiasesSeeOnlyTheirOwnCache) {
  LoadedTinyModel tiny(llama_spec(true, true, 32.0));
  TargetModel& model = *tiny.model;
  const int64_t vocab = model.config().vocab_size;
  const std::vector<int32_t> a = some_tokens(7, 400, 5), b = some_tokens(3, 400, 6);
  KvCache alone_a = model.make_cache(64), alone_b = model.make_cache(64);
  const std::vector<float> want_a = forward_all(model, a, alone_a), want_b = forward_all(model, b, alone_b);
  KvCache ca = model.make_cache(64), cb = model.make_cache(64);
  std::vector<SequenceChunk> chunks = {{a, &ca}, {b, &cb}};
  const std::vector<float> batched =
      to_host(model.backend(), model.forward(chunks, {.logits = LogitRows::kAll}).logits);
  EXPECT_LT(max_normalized_error(rows(batched, vocab, 0, 7), want_a), 1e-5);
  EXPECT_LT(max_normalized_error(rows(batched, vocab, 7, 3), want_b), 1e-5);
}

// The same weights under a different rope_scaling factor: position 0 is not rotated at all,
// so its logits stay; later positions see different angles at the low frequencies.
TEST(LlamaModel, RopeScalingFactorMovesLatePositionsOnly) {
  TempDir dir;
  write_tiny_model(llama_spec(false, false, 8.0), dir.path());
  const std::vector<int32_t> tokens = some_tokens(40, 400, 3);
  auto logits_with_factor = [&](double factor) {
    nlohmann::json config = read_json_file(dir / "config.json");
    config["rope_scaling"]["factor"] = factor;
    write_text_file(dir / "config.json", config.dump());
    auto backend = make_cpu_backend();
    auto model = load_target_model(dir.path(), *backend);
    KvCache cache = model->make_cache(64);
    return forward_all(*model, tokens, cache);
  };
  const std::vector<float> x8 = logits_with_factor(8.0), x2 = logits_with_factor(2.0);
  const int64_t vocab = 400;
  EXPECT_LT(max_normalized_error(rows(x2, vocab, 0, 1), rows(x8, vocab, 0, 1)), 1e-6);
  EXPECT_GT(max_normalized_error(rows(x2, vocab, 39, 1), rows(x8, vocab, 39, 1)), 1e-3);
}

TEST(LlamaModel, RefusesBiasTensorsTheConfigDoesNotNameAndNamedOnesMissing) {
  TempDir dir;
  write_tiny_model(llama_spec(/*biases=*/true, false, 0.0), dir.path());
  nlohmann::json config = read_json_file(dir / "config.json");
  config["attention_bias"] = false;
  write_text_file(dir / "config.json", config.dump());
  std::string message;
  EXPECT_EQ(load_error(dir.path(), &message), ErrorCode::kBadCheckpoint);
  EXPECT_NE(message.find("self_attn.q_proj.bias"), std::string::npos) << message;

  TempDir plain;
  write_tiny_model(llama_spec(/*biases=*/false, false, 0.0), plain.path());
  config = read_json_file(plain / "config.json");
  config["mlp_bias"] = true;
  write_text_file(plain / "config.json", config.dump());
  EXPECT_EQ(load_error(plain.path(), &message), ErrorCode::kNotFound);  // as any missing tensor
  EXPECT_NE(message.find("mlp.gate_proj.bias"), std::string::npos) << message;
}

// The presets' shapes are meta-llama's published config.json files (docs/models.md).
TEST(LlamaModel, PresetsHaveThePublishedShapes) {
  const TinyModelSpec small = preset_spec("llama3.2-1b");
  EXPECT_EQ(small.family, "llama");
  EXPECT_EQ(small.layers, 16);
  EXPECT_EQ(small.hidden, 2048);
  EXPECT_EQ(small.heads, 32);
  EXPECT_EQ(small.kv_heads, 8);
  EXPECT_EQ(small.head_dim, 64);
  EXPECT_EQ(small.inter, 8192);
  EXPECT_EQ(small.vocab, 128256);
  EXPECT_EQ(small.max_position, 131072);
  EXPECT_TRUE(small.tie_embeddings);
  EXPECT_EQ(small.rope_theta, 500000.0);
  EXPECT_EQ(small.rope_scaling_factor, 32.0);
  EXPECT_EQ(small.low_freq_factor, 1.0);
  EXPECT_EQ(small.high_freq_factor, 4.0);
  EXPECT_EQ(small.original_max_position, 8192);

  const TinyModelSpec large = preset_spec("llama3.1-8b");
  EXPECT_EQ(large.family, "llama");
  EXPECT_EQ(large.layers, 32);
  EXPECT_EQ(large.hidden, 4096);
  EXPECT_EQ(large.heads, 32);
  EXPECT_EQ(large.kv_heads, 8);
  EXPECT_EQ(large.head_dim, 128);
  EXPECT_EQ(large.inter, 14336);
  EXPECT_EQ(large.vocab, 128256);
  EXPECT_FALSE(large.tie_embeddings);
  EXPECT_EQ(large.rope_scaling_factor, 8.0);
  EXPECT_EQ(large.original_max_position, 8192);
}

TEST(LlamaModel, MakeTinyRefusesLlamaOptionsForQwen3AndUnknownFamilies) {
  TempDir dir;
  TinyModelSpec spec = llama_spec(false, false, 0.0);
  spec.family = "mistral";
  EXPECT_THROW(write_tiny_model(spec, dir.path()), Error);
  spec.family = "qwen3";
  spec.attention_bias = true;
  EXPECT_THROW(write_tiny_model(spec, dir.path()), Error);
  spec = llama_spec(false, false, 8.0);
  spec.high_freq_factor = 0.5;  // below low_freq_factor
  EXPECT_THROW(write_tiny_model(spec, dir.path()), Error);
}

}  // namespace
}  // namespace flashq::testing
