// Plain generation on a random tiny model: stops, lengths, streaming, seeds and queue time, and a
// continuation's text carrying on where the earlier attempt's stopped.
#include <chrono>

#include <gtest/gtest.h>

#include "tests/model/tiny_model.h"
#include "worker/engine/engine.h"
#include "worker/serving/generate.h"

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

  // What is streamed for one sequence, one step at a time (one token each, without a drafter);
  // a continuation's text carries on from its resume tokens (the last `resumed` of the prompt),
  // `streamed_bytes` of whose text reached the client, as a worker's output thread does.
  struct Streamed {
    std::vector<int32_t> ids;
    std::vector<std::string> step_text;
    std::string text;
    FinishReason finish_reason = FinishReason::kLength;
  };
  Streamed stream(const SequenceRequest& request, size_t resumed = 0, int64_t streamed_bytes = 0) {
    TextStream text(*tokenizer_, request.generation.stop,
                    std::span<const int32_t>(request.generation.prompt_tokens).last(resumed), streamed_bytes);
    Streamed out;
    const SequenceOutput output = generate_sequence(
        *tiny_.model, /*proposer=*/nullptr, *tokenizer_, request, {.max_slots = 1},
        [&out](std::span<const int32_t>, std::string_view step_text) { out.step_text.emplace_back(step_text); },
        &text);
    out.ids = output.tokens;
    out.text = output.text;
    out.finish_reason = output.finish_reason;
    return out;
  }
  // The sequence resumed after the first k tokens of `whole`, as a worker continues a job.
  Streamed resume(const GenerationRequest& request, const Streamed& whole, size_t k) {
    std::string streamed;
    for (size_t i = 0; i < k; ++i) streamed += whole.step_text[i];
    SequenceRequest continuation{.generation = request, .spec = SpecMode::kOff};
    std::vector<int32_t>& prompt = continuation.generation.prompt_tokens;
    prompt.insert(prompt.end(), whole.ids.begin(), whole.ids.begin() + static_cast<std::ptrdiff_t>(k));
    continuation.generation.max_tokens -= static_cast<int64_t>(k);
    Streamed rest = stream(continuation, k, static_cast<int64_t>(streamed.size()));
    rest.text = streamed + rest.text;
    return rest;
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

// A sequence that waits for a slot counts the wait as queue time: behind a running sequence in a
// one-slot engine it is admitted only once that one has finished, so it queued at least as long as
// the first ran, less the time between the two adds.
TEST_F(Generate, QueueTimeRunsUntilTheEngineAdmitsTheSequence) {
  Engine engine(*tiny_.model, /*proposer=*/nullptr, {.max_slots = 1});
  GenerationRequest request{.max_tokens = 16, .ignore_eos = true};
  request.prompt_tokens = tokenizer_->encode("a queue of jobs");
  const auto before_adds = std::chrono::steady_clock::now();
  engine.add(0, {.generation = request, .spec = SpecMode::kOff});
  engine.add(1, {.generation = request, .spec = SpecMode::kOff});
  const double between_adds_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - before_adds).count();
  engine.run_until_idle();
  std::vector<FinishedSequence> done = engine.take_finished();
  ASSERT_EQ(done.size(), 2u);
  if (done[0].id != 0) std::swap(done[0], done[1]);
  EXPECT_LE(done[0].queue_s, done[0].time_to_first_token_s);
  EXPECT_GE(done[1].queue_s, done[0].total_s - between_adds_s);
  EXPECT_LE(done[1].queue_s, done[1].time_to_first_token_s);
  EXPECT_LE(done[1].time_to_first_token_s, done[1].total_s);
}

// A continuation's text carries on where the earlier attempt's stopped: together they stream
// exactly the uninterrupted text, a stop string that spans the resume point included.
TEST_F(Generate, AResumedSequenceStreamsExactlyTheRestOfTheText) {
  GenerationRequest request{.max_tokens = 24, .ignore_eos = true};
  request.prompt_tokens = tokenizer_->encode("a queue of jobs");
  const Streamed whole = stream({.generation = request, .spec = SpecMode::kOff});
  ASSERT_EQ(whole.ids.size(), 24u);
  for (size_t k = 1; k < whole.ids.size(); ++k) {
    const Streamed rest = resume(request, whole, k);
    EXPECT_EQ(rest.text, whole.text) << "resumed after " << k;
    EXPECT_EQ(rest.ids, std::vector<int32_t>(whole.ids.begin() + static_cast<std::ptrdiff_t>(k), whole.ids.end()))
        << "resumed after " << k;
    EXPECT_EQ(rest.finish_reason, FinishReason::kLength) << "resumed after " << k;
  }

  ASSERT_GE(whole.text.size(), 12u);
  request.stop = {whole.text.substr(whole.text.size() / 2, 3)};
  const Streamed stopped = stream({.generation = request, .spec = SpecMode::kOff});
  ASSERT_EQ(stopped.finish_reason, FinishReason::kStop);
  for (size_t k = 1; k < stopped.ids.size(); ++k) {
    const Streamed rest = resume(request, stopped, k);
    EXPECT_EQ(rest.text, stopped.text) << "resumed after " << k;
    EXPECT_EQ(rest.finish_reason, FinishReason::kStop) << "resumed after " << k;
  }
}

}  // namespace
}  // namespace flashq::testing
