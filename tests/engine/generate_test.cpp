// Plain generation on a random tiny model: stops, lengths, streaming and seeds.
#include <gtest/gtest.h>

#include "tests/model/tiny_model.h"
#include "worker/engine/generate.h"

namespace flashq::testing {
namespace {

class Generate : public ::testing::Test {
 protected:
  static TinyModelSpec spec() {
    TinyModelSpec s;
    s.seed = 31;
    return s;
  }
  Generate() : tiny_(spec()), tokenizer_(load_tokenizer(tiny_.dir.path())) {}

  GenerationResult run(GenerationRequest request, const StreamCallback& on_step = {}) {
    if (request.prompt_tokens.empty()) request.prompt_tokens = tokenizer_->encode("a queue of jobs");
    return generate(*tiny_.model, *tokenizer_, request, on_step);
  }

  LoadedTinyModel tiny_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(Generate, MaxTokensEndsWithLength) {
  GenerationResult r = run({.max_tokens = 7, .ignore_eos = true});
  EXPECT_EQ(r.tokens.size(), 7u);
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.stats.completion_tokens, 7);
}

TEST_F(Generate, StreamedTextEqualsTheFinalText) {
  std::string streamed;
  std::vector<int32_t> ids;
  GenerationResult r = run({.max_tokens = 24, .ignore_eos = true}, [&](std::span<const int32_t> step, std::string_view text) {
    ids.insert(ids.end(), step.begin(), step.end());
    streamed += text;
  });
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(ids, r.tokens);
}

TEST_F(Generate, AStopTokenEndsGenerationAndIsNotOutput) {
  GenerationResult free_run = run({.max_tokens = 10, .ignore_eos = true});
  GenerationRequest request{.max_tokens = 10, .ignore_eos = true};
  request.stop_token_ids = {free_run.tokens[3]};
  GenerationResult stopped = run(request);
  const auto first = std::find(free_run.tokens.begin(), free_run.tokens.end(), free_run.tokens[3]);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free_run.tokens.begin(), first));
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
}

TEST_F(Generate, AStopStringEndsGenerationBeforeIt) {
  GenerationResult free_run = run({.max_tokens = 40, .ignore_eos = true});
  ASSERT_GE(free_run.text.size(), 12u);
  const std::string stop = free_run.text.substr(free_run.text.size() / 2, 3);
  GenerationRequest request{.max_tokens = 40, .ignore_eos = true};
  request.stop = {stop};
  GenerationResult stopped = run(request);
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, free_run.text.substr(0, free_run.text.find(stop)));
}

TEST_F(Generate, SameSeedSameSampledOutput) {
  GenerationRequest request{.max_tokens = 16, .ignore_eos = true};
  request.sampling = {.temperature = 1.0f, .top_p = 0.9f, .seed = 5};
  EXPECT_EQ(run(request).tokens, run(request).tokens);
  GenerationRequest other = request;
  other.sampling.seed = 6;
  EXPECT_NE(run(request).tokens, run(other).tokens);
}

TEST_F(Generate, RejectsEmptyAndOversizePrompts) {
  EXPECT_THROW(generate(*tiny_.model, *tokenizer_, {.max_tokens = 4}), Error);
  GenerationRequest huge{.max_tokens = 4};
  huge.prompt_tokens.assign(5000, 1);  // the tiny model's context is 4096
  EXPECT_THROW(run(huge), Error);
}

}  // namespace
}  // namespace flashq::testing
