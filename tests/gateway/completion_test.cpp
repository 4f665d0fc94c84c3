// /v1/completions: the prompt as text, token ids or several prompts; the context judged for token
// ids; refusals; text_completion chunks and the whole response.
#include <gtest/gtest.h>

#include "gateway/openai/completion_stream.h"
#include "tests/gateway/openai_test_support.h"

namespace flashq::gateway {
namespace {

using nlohmann::json;
using testing::body;
using testing::completion_error;
using testing::job_events;
using testing::test_models;

constexpr std::int64_t kCreated = 1767225600;

GenerationRequest read(const json& b, const RequestExtensions& ext = {}) {
  return read_completion_request(b, test_models(), ext);
}

TEST(CompletionRequest, PromptAsTextOrTokenIds) {
  GenerationRequest r = read(body(R"({"model": "llama", "prompt": "Once upon", "max_tokens": 16, "temperature": 0,
      "top_p": 0.9, "seed": 3, "stop": "\n", "user": "u", "n": 2, "echo": false, "best_of": 1, "suffix": null})"));
  EXPECT_EQ(r.endpoint, Endpoint::kCompletions);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(std::get<std::string>(r.jobs[0].prompt), "Once upon");
  EXPECT_EQ(r.jobs[0].max_tokens, 16);
  EXPECT_EQ(r.jobs[0].temperature, 0);
  EXPECT_EQ(r.jobs[0].top_p, 0.9);
  EXPECT_EQ(r.jobs[0].stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.jobs[0].seed, 3u);
  EXPECT_EQ(r.jobs[1].seed, 4u);
  EXPECT_TRUE(r.jobs[0].stream);
  EXPECT_EQ(r.jobs[0].model, "llama");
  EXPECT_FALSE(r.has_tools);
  EXPECT_FALSE(r.parse_reasoning);

  r = read(body(R"({"model": "llama", "prompt": [128000, 9906, 11]})"));
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(std::get<protocol::TokenIds>(r.jobs[0].prompt), (protocol::TokenIds{128000, 9906, 11}));
  EXPECT_EQ(r.jobs[0].max_tokens, 256);
}

TEST(CompletionRequest, SeveralPromptsAreSeveralGroupsOfChoices) {
  const GenerationRequest r = read(body(R"({"model": "llama", "prompt": ["a", [1, 2], "c"], "n": 2})"));
  ASSERT_EQ(r.jobs.size(), 6u);
  EXPECT_EQ(r.prompt_of_choice, (std::vector<std::size_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(std::get<std::string>(r.jobs[1].prompt), "a");
  EXPECT_EQ(std::get<protocol::TokenIds>(r.jobs[2].prompt), (protocol::TokenIds{1, 2}));
  EXPECT_EQ(std::get<std::string>(r.jobs[5].prompt), "c");
  const ApiError e = completion_error(body(R"({"model": "llama", "prompt": ["a", "b", "c"], "n": 50})"));
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "n");
}

TEST(CompletionRequest, TokenPromptsAreJudgedAgainstTheContext) {
  // llama: 8192 tokens. The default is cut to what fits.
  RequestExtensions ext;
  ext.default_max_tokens = 4000;
  const json fits = {{"model", "llama"}, {"prompt", std::vector<int>(6000, 5)}};
  EXPECT_EQ(read(fits, ext).jobs[0].max_tokens, 2192);
  json too_long = fits;
  too_long["max_tokens"] = 2193;
  ApiError e = completion_error(too_long);
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "context_length_exceeded");
  EXPECT_EQ(e.param(), "max_tokens");
  too_long["max_tokens"] = 2192;
  EXPECT_EQ(read(too_long).jobs[0].max_tokens, 2192);
  e = completion_error({{"model", "llama"}, {"prompt", std::vector<int>(8192, 5)}});
  EXPECT_EQ(e.code(), "context_length_exceeded");
  EXPECT_EQ(e.param(), "prompt");
  e = completion_error({{"model", "llama"}, {"prompt", json::array({"short", std::vector<int>(9000, 5)})}});
  EXPECT_EQ(e.code(), "context_length_exceeded");
  EXPECT_EQ(e.param(), "prompt[1]");
  // Text is the worker's to judge, past the one token any prompt holds; an unknown context judges
  // nothing.
  EXPECT_EQ(read({{"model", "llama"}, {"prompt", "x"}, {"max_tokens", 8191}}).jobs[0].max_tokens, 8191);
  e = completion_error({{"model", "llama"}, {"prompt", "x"}, {"max_tokens", 8192}});
  EXPECT_EQ(e.code(), "context_length_exceeded");
  EXPECT_EQ(e.param(), "max_tokens");
  ext.default_max_tokens = 100000;
  EXPECT_EQ(read({{"model", "llama"}, {"prompt", "x"}}, ext).jobs[0].max_tokens, 8191);
  EXPECT_EQ(read({{"model", "plain"}, {"prompt", std::vector<int>(9000, 5)}, {"max_tokens", 9000}}).jobs[0].max_tokens,
            9000);
}

TEST(CompletionRequest, LogprobsAskEveryChoiceForThatManyCandidates) {
  const GenerationRequest asked = read_completion_request(
      body(R"({"model": "llama", "prompt": ["a", "b"], "logprobs": 5})"), test_models(), {});
  ASSERT_EQ(asked.jobs.size(), 2u);
  for (const protocol::Job& job : asked.jobs) EXPECT_EQ(job.logprobs, 5);
  const GenerationRequest plain = read_completion_request(
      body(R"({"model": "llama", "prompt": "a", "logprobs": null})"), test_models(), {});
  EXPECT_EQ(plain.jobs.at(0).logprobs, std::nullopt);
}

TEST(CompletionRequest, Refusals) {
  struct Case {
    const char* field;
    const char* value;
    const char* code;
  };
  for (const Case& c : std::vector<Case>{{"echo", "true", "unsupported_parameter"},
                                         {"best_of", "2", "unsupported_parameter"},
                                         {"suffix", R"("end")", "unsupported_parameter"},
                                         {"logprobs", "21", "invalid_value"},
                                         {"logprobs", "-1", "invalid_value"},
                                         {"logprobs", "true", "invalid_type"},
                                         {"logit_bias", R"({"1": 5})", "unsupported_parameter"},
                                         {"presence_penalty", "1", "unsupported_parameter"},
                                         {"messages", "[]", "unrecognized_request_argument"},
                                         {"tools", "[]", "unrecognized_request_argument"},
                                         {"max_completion_tokens", "5", "unrecognized_request_argument"},
                                         {"prompt", R"("")", "invalid_value"},
                                         {"prompt", "[]", "invalid_type"},
                                         {"prompt", "5", "invalid_type"},
                                         {"prompt", R"([1, "a"])", "invalid_type"},
                                         {"prompt", "[-1]", "invalid_value"},
                                         {"prompt", "[4294967296]", "invalid_value"}}) {
    json b = body(R"({"model": "llama", "prompt": "x"})");
    b[c.field] = json::parse(c.value);
    const ApiError e = completion_error(b);
    EXPECT_EQ(e.status(), 400) << c.field << " " << c.value;
    EXPECT_EQ(e.type(), "invalid_request_error");
    EXPECT_EQ(e.code(), c.code) << c.field << " " << c.value << ": " << e.what();
    EXPECT_TRUE(e.param().has_value() && e.param()->starts_with(c.field)) << c.field << " " << c.value;
  }
  EXPECT_EQ(completion_error(body(R"({"model": "nope", "prompt": "x"})")).status(), 404);
  EXPECT_EQ(completion_error(body(R"({"model": "llama"})")).code(), "missing_required_parameter");
}

TEST(CompletionStream, TextChunksThenFinishAndUsage) {
  const GenerationRequest r = read(
      body(R"({"model": "qwen3", "prompt": "<think>", "stream": true, "stream_options": {"include_usage": true}})"));
  CompletionRenderer renderer(r, {"job-9"}, kCreated);
  std::vector<std::string> chunks;
  for (const protocol::Event& e :
       job_events({"<think>a", "", "b</think>", ""}, protocol::FinishReason::kLength, {4, 3})) {
    for (std::string& c : renderer.on_event(0, e)) chunks.push_back(std::move(c));
  }
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(json::parse(chunks[0]), json::parse(R"({"id": "job-9", "object": "text_completion", "created": 1767225600,
      "model": "qwen3", "choices": [{"index": 0, "text": "<think>a", "logprobs": null, "finish_reason": null}],
      "usage": null})"));
  EXPECT_EQ(json::parse(chunks[1])["choices"][0]["text"], "b</think>") << "completions text is not parsed";
  EXPECT_EQ(json::parse(chunks[2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(chunks[2])["choices"][0]["text"], "");
  const std::vector<std::string> tail = renderer.finish();
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(json::parse(tail[0]), json::parse(R"({"id": "job-9", "object": "text_completion", "created": 1767225600,
      "model": "qwen3", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}})"));
}

TEST(CompletionStream, AWholeResponseCountsEachPromptOnce) {
  const GenerationRequest r = read(body(R"({"model": "llama", "prompt": ["a", "bb"], "n": 2})"));
  CompletionRenderer renderer(r, {"j0", "j1", "j2", "j3"}, kCreated);
  const std::vector<std::int64_t> prompt_tokens = {2, 2, 3, 3};
  for (std::size_t i = 0; i < 4; ++i) {
    for (const protocol::Event& e :
         job_events({"x" + std::to_string(i)}, protocol::FinishReason::kStop, {prompt_tokens[i], 1})) {
      EXPECT_TRUE(renderer.on_event(i, e).empty());
    }
  }
  EXPECT_TRUE(renderer.finish().empty());
  const json response = json::parse(renderer.response());
  EXPECT_EQ(response["id"], "j0");
  EXPECT_EQ(response["object"], "text_completion");
  ASSERT_EQ(response["choices"].size(), 4u);
  EXPECT_EQ(response["choices"][3],
            json::parse(R"({"index": 3, "text": "x3", "logprobs": null, "finish_reason": "stop"})"));
  EXPECT_EQ(response["usage"], json::parse(R"({"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})"));
}

TEST(CompletionStream, AFailedJobIsAnError) {
  const GenerationRequest r = read(body(R"({"model": "llama", "prompt": "a", "stream": true})"));
  CompletionRenderer renderer(r, {"j0"}, kCreated);
  const std::vector<std::string> out =
      renderer.on_event(0, job_events({"partial"}, protocol::FinishReason::kDeadline, {1, 1})[0]);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(json::parse(out[0])["error"]["code"], "timeout");
  EXPECT_EQ(renderer.failure()->status(), 504);
  EXPECT_THROW((void)renderer.response(), ApiError);
}

}  // namespace
}  // namespace flashq::gateway
