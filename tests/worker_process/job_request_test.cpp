// make_job_request: from an ASSIGN to the engine's sequence request (prompt, resume tokens,
// max_tokens, sampling, stops, speculation).
#include "worker/process/job_request.h"

#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/support/tiny_tokenizer_suite.h"

namespace flashq::testing {
namespace {

class JobRequestTest : public TinyTokenizerSuite {};

protocol::Assign assign_with(protocol::Prompt prompt, int64_t max_tokens) {
  protocol::Assign a;
  a.job.id = "j";
  a.job.prompt = std::move(prompt);
  a.job.max_tokens = max_tokens;
  return a;
}

TEST_F(JobRequestTest, RequestAppendsResumeTokensAndShortensMaxTokens) {
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

TEST_F(JobRequestTest, RequestKeepsTheBlockSizeOnlyWhereADraftCanBeMade) {
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

TEST_F(JobRequestTest, RequestForAnotherModelIsRefusedNamingBoth) {
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

TEST_F(JobRequestTest, ChatMessagesAreFormattedWithChatml) {
  protocol::Assign a = assign_with(std::vector<protocol::ChatMessage>{{"user", "hi"}}, 4);
  JobRequest r = make_job_request(a, *tokenizer_, {"m", false, &chatml_template()});
  EXPECT_EQ(tokenizer_->decode(r.sequence.generation.prompt_tokens),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace flashq::testing
