// JobText and make_job_request: a continuation streams exactly what the uninterrupted attempt
// would have streamed after the resume point, text and stops included.
#include "worker/process/job_text.h"

#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/support/temp_dir.h"
#include "tools/flashq_model/tiny_tokenizer.h"
#include "worker/process/job_request.h"
#include "worker/tokenizer/incremental_decoder.h"

namespace flashq::testing {
namespace {

class JobTextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    write_tiny_tokenizer(dir_->path(), 511);
    tokenizer_ = load_tokenizer(dir_->path()).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete dir_;
  }

  // The text each token's step streams, uninterrupted, ending at the first stop.
  struct Run {
    std::vector<std::string> step_text;  // one per token kept
    std::string tail;                    // released at the end
    bool stopped = false;
  };
  static Run run(const std::vector<int32_t>& ids, const std::vector<std::string>& stop, size_t from = 0,
                 int64_t resume_text_bytes = 0) {
    Run out;
    JobText text(*tokenizer_, stop, std::span(ids).first(from), resume_text_bytes);
    for (size_t i = from; i < ids.size(); ++i) {
      JobText::Step step = text.push({&ids[i], 1});
      out.step_text.push_back(step.text);
      if (step.stopped) {
        out.stopped = true;
        return out;
      }
    }
    JobText::Step tail = text.finish();
    out.tail = tail.text;
    out.stopped = tail.stopped;
    return out;
  }
  static std::string joined(const Run& r, size_t from = 0) {
    std::string s;
    for (size_t i = from; i < r.step_text.size(); ++i) s += r.step_text[i];
    return s + r.tail;
  }

  static TempDir* dir_;
  static Tokenizer* tokenizer_;
};
TempDir* JobTextTest::dir_ = nullptr;
Tokenizer* JobTextTest::tokenizer_ = nullptr;

TEST_F(JobTextTest, UninterruptedTextIsTheDecodedOutput) {
  const std::vector<int32_t> ids = tokenizer_->encode("naïve café → 東京 queue");
  EXPECT_EQ(joined(run(ids, {})), tokenizer_->decode(ids));
}

TEST_F(JobTextTest, ContinuationAtEverySplitStreamsTheRemainderWithCharactersWhole) {
  const std::vector<int32_t> ids = tokenizer_->encode("naïve café → 東京 queue 😀!");
  const Run whole = run(ids, {});
  for (size_t k = 1; k < ids.size(); ++k) {
    std::string streamed;
    for (size_t i = 0; i < k; ++i) streamed += whole.step_text[i];
    const Run rest = run(ids, {}, k, static_cast<int64_t>(streamed.size()));
    EXPECT_EQ(streamed + joined(rest), joined(whole)) << "split at " << k;
  }
}

// The earlier attempt ended and streamed its tail (an unfinished character comes out as U+FFFD)
// but died before its final result: the continuation must not send that tail again.
TEST_F(JobTextTest, ContinuationAfterTheTailWasStreamedSendsNothingTwice) {
  const std::vector<int32_t> ids = tokenizer_->encode("café → 東京 😀");
  bool some_tail_was_unfinished = false;
  for (size_t k = 1; k <= ids.size(); ++k) {
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
    const std::string streamed = joined(run(prefix, {}));
    some_tail_was_unfinished |= streamed.find("\xEF\xBF\xBD") != std::string::npos;
    JobText text(*tokenizer_, {}, prefix, static_cast<int64_t>(streamed.size()));
    EXPECT_EQ(text.finish().text, "") << "after " << k << " tokens";
  }
  EXPECT_TRUE(some_tail_was_unfinished) << "no prefix ends inside a character: the case is not covered";
}

TEST_F(JobTextTest, StopStringSpanningTheResumePointStillStopsAtTheSameToken) {
  const std::vector<int32_t> ids = tokenizer_->encode("alpha beta STOP gamma delta");
  const std::vector<std::string> stop = {"STOP"};
  const Run whole = run(ids, stop);
  ASSERT_TRUE(whole.stopped);
  EXPECT_EQ(joined(whole), "alpha beta ");
  for (size_t k = 1; k < whole.step_text.size(); ++k) {
    std::string streamed;
    for (size_t i = 0; i < k; ++i) streamed += whole.step_text[i];
    const Run rest = run(ids, stop, k, static_cast<int64_t>(streamed.size()));
    EXPECT_TRUE(rest.stopped) << "split at " << k;
    EXPECT_EQ(k + rest.step_text.size(), whole.step_text.size()) << "split at " << k;
    EXPECT_EQ(streamed + joined(rest), joined(whole)) << "split at " << k;
  }
}

TEST_F(JobTextTest, TextHeldBackByTheEarlierAttemptIsSentWithTheFirstStep) {
  const std::vector<int32_t> ids = tokenizer_->encode("hello world");
  const std::string all = tokenizer_->decode(ids);
  // The earlier attempt streamed only "hel" of it (say a stop string "help" was still possible).
  JobText text(*tokenizer_, {}, ids, 3);
  EXPECT_EQ(text.finish().text, all.substr(3));
}

protocol::Assign assign_with(protocol::Prompt prompt, int64_t max_tokens) {
  protocol::Assign a;
  a.job.id = "j";
  a.job.prompt = std::move(prompt);
  a.job.max_tokens = max_tokens;
  return a;
}

TEST_F(JobTextTest, RequestAppendsResumeTokensAndShortensMaxTokens) {
  protocol::Assign a = assign_with(protocol::TokenIds{1, 2, 3}, 10);
  a.resume_tokens = {4, 5};
  a.job.temperature = 0.5;
  a.job.top_k = 7;
  a.job.top_p = 0.9;
  a.job.seed = 42;
  a.job.stop = {"x"};
  a.job.stop_token_ids = {9};
  JobRequest r = make_job_request(a, *tokenizer_, {"m", false});
  EXPECT_EQ(r.sequence.generation.prompt_tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(r.job_prompt_tokens, 3);
  EXPECT_EQ(r.resumed_tokens, 2);
  EXPECT_EQ(r.sequence.generation.max_tokens, 8);
  EXPECT_FALSE(r.nothing_left);
  EXPECT_FLOAT_EQ(r.sequence.generation.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sequence.generation.sampling.top_k, 7);
  EXPECT_EQ(r.sequence.generation.sampling.seed, 42u);
  EXPECT_EQ(r.sequence.generation.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.sequence.generation.stop_token_ids, std::vector<int32_t>{9});

  a.resume_tokens = std::vector<int32_t>(10, 4);
  EXPECT_TRUE(make_job_request(a, *tokenizer_, {"m", false}).nothing_left);
}

TEST_F(JobTextTest, RequestKeepsTheBlockSizeOnlyWhereADraftCanBeMade) {
  protocol::Assign a = assign_with("hi", 4);
  a.job.block_size = 4;
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.block_size, 4);
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", false}).sequence.block_size, 0);
  a.job.spec = protocol::SpecMode::kOff;
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.block_size, 0);
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.spec, SpecMode::kOff);
  a.job.spec = protocol::SpecMode::kDflash;  // without a drafter it runs target-only (protocol 9.5)
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", false}).sequence.spec, SpecMode::kOff);
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.spec, SpecMode::kDflash);
}

TEST_F(JobTextTest, RequestForAnotherModelIsRefusedNamingBoth) {
  protocol::Assign a = assign_with("hi", 4);
  a.job.model = "other";
  try {
    make_job_request(a, *tokenizer_, {"mine", false});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("mine"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("other"), std::string::npos);
  }
  a.job.model = "mine";
  EXPECT_NO_THROW(make_job_request(a, *tokenizer_, {"mine", false}));
}

TEST_F(JobTextTest, ChatMessagesAreFormattedWithChatml) {
  protocol::Assign a = assign_with(std::vector<protocol::ChatMessage>{{"user", "hi"}}, 4);
  JobRequest r = make_job_request(a, *tokenizer_, {"m", false, &chatml_template()});
  EXPECT_EQ(tokenizer_->decode(r.sequence.generation.prompt_tokens),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace flashq::testing
