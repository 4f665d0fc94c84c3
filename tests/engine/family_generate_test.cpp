// A Llama target (with and without attention and MLP biases, llama3 RoPE scaling on) served by
// the engine unchanged: greedy generation is the argmax of the model's own logits step by step;
// its Llama 3-style tiny tokenizer has Llama 3's special tokens and round-trips text; and a DFlash drafter made for it
// loads with the layer options its config names (Qwen3 layers, the target's RoPE and attention biases) and drafts
// through the engine without changing the output. The logits themselves, and lossless decoding over many prompts, are
// checked against the NumPy reference elsewhere.
#include <gtest/gtest.h>

#include "tests/engine/dflash_test_pair.h"
#include "worker/serving/generate.h"

namespace flashq::testing {
namespace {

TinyModelSpec llama_target(bool biases, uint64_t seed) {
  TinyModelSpec s = f32_target(seed);
  s.family = "llama";
  s.rope_theta = 500000.0;
  s.attention_bias = biases, s.mlp_bias = biases;
  s.rope_scaling_factor = 8.0, s.original_max_position = 32;  // scaling that matters at these lengths
  return s;
}

// The greedy continuation computed directly from the model's logits, one token per pass.
std::vector<int32_t> argmax_continuation(TargetModel& model, std::vector<int32_t> prompt, int64_t count) {
  KvCache cache = model.make_cache(256);
  std::vector<int32_t> out;
  std::vector<int32_t> next = std::move(prompt);
  for (int64_t i = 0; i < count; ++i) {
    SequenceChunk chunk{next, &cache};
    const std::vector<float> logits = to_host(model.backend(), model.forward({&chunk, 1}, {}).logits);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    out.push_back(static_cast<int32_t>(best));
    next = {out.back()};
  }
  return out;
}

TEST(LlamaTarget, GreedyGenerationIsTheArgmaxOfItsLogitsWithAndWithoutBiases) {
  for (bool biases : {false, true}) {
    LoadedTinyModel tiny(llama_target(biases, 41));
    const auto tokenizer = load_tokenizer(tiny.dir.path());
    GenerationRequest request;
    request.prompt_tokens = tokenizer->encode("The queue accepts generation jobs from producers.");
    request.max_tokens = 24;
    request.ignore_eos = true;
    const GenerationResult result = generate(*tiny.model, *tokenizer, request);
    ASSERT_EQ(result.tokens.size(), 24u) << "biases " << biases;
    EXPECT_EQ(result.tokens, argmax_continuation(*tiny.model, request.prompt_tokens, 24)) << "biases " << biases;
  }
}

TEST(LlamaTarget, TinyTokenizerHasLlama3SpecialTokensAndTheConfigNamesThem) {
  LoadedTinyModel tiny(llama_target(false, 43));
  const auto tokenizer = load_tokenizer(tiny.dir.path());
  const auto bos = tokenizer->token_to_id("<|begin_of_text|>");
  const auto eot = tokenizer->token_to_id("<|eot_id|>");
  const auto end = tokenizer->token_to_id("<|end_of_text|>");
  ASSERT_TRUE(bos && eot && end && tokenizer->token_to_id("<|start_header_id|>"));
  EXPECT_TRUE(tokenizer->is_special(*eot));
  const std::vector<int32_t>& eos = tiny.model->config().eos_token_ids;
  EXPECT_NE(std::find(eos.begin(), eos.end(), *eot), eos.end());
  EXPECT_NE(std::find(eos.begin(), eos.end(), *end), eos.end());
  const std::string text = "Numbers 12345 and code: int x = 42;\n";
  EXPECT_EQ(tokenizer->decode(tokenizer->encode(text)), text);
  EXPECT_EQ(tokenizer->encode("<|eot_id|>"), std::vector<int32_t>{*eot});
  // The last embedding row is beyond the tokenizer: a drafter's MASK.
  EXPECT_LT(tokenizer->vocab_size(), tiny.model->config().vocab_size);
}

TEST(LlamaTarget, DrafterTakesTheTargetsRopeAndBiasesAndDraftsWithoutChangingTheOutput) {
  DFlashTestPair pair(llama_target(true, 47), {.layers = 2, .block_size = 8, .seed = 47});
  const ModelConfig& layers = pair.drafter->config().layers;
  EXPECT_TRUE(layers.qk_norm);
  EXPECT_TRUE(layers.attention_bias);
  EXPECT_FALSE(layers.mlp_bias);
  EXPECT_EQ(layers.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(layers.rope_theta, 500000.0);
  EXPECT_EQ(layers.rope_factor, 8.0);

  TargetModel& model = *pair.target.model;
  SequenceRequest request;
  request.generation.prompt_tokens = some_tokens(9, 459, 5);
  request.generation.max_tokens = 30;
  request.generation.ignore_eos = true;
  SequenceRequest plain = request;
  plain.spec = SpecMode::kOff;
  request.spec = SpecMode::kDflash;
  request.block_size = 8;
  std::vector<TraceRecord> trace;
  const auto speculative = run_engine(model, pair.proposer.get(), {request}, 1, &trace);
  EXPECT_EQ(speculative[0], run_engine(model, nullptr, {plain}, 1)[0]);
  EXPECT_FALSE(trace.empty());
}

}  // namespace
}  // namespace flashq::testing
