// /v1/chat/completions read into jobs: every field implemented, every extension, every refusal
// with the status, type, code and param a client sees.
#include <gtest/gtest.h>

#include "gateway/openai/generation_request.h"
#include "tests/gateway/openai_test_support.h"

namespace flashq::gateway {
namespace {

using json = nlohmann::ordered_json;
using testing::body;
using testing::chat_error;
using testing::test_models;

GenerationRequest read(const json& b, const RequestExtensions& ext = {}) {
  return read_chat_completion_request(b, test_models(), ext);
}

const std::vector<protocol::ChatMessage>& messages_of(const protocol::Job& job) {
  return std::get<std::vector<protocol::ChatMessage>>(job.prompt);
}

void expect_error(const ApiError& e, int status, const std::string& type, const std::string& code,
                  const std::optional<std::string>& param) {
  EXPECT_EQ(e.status(), status) << e.what();
  EXPECT_EQ(e.type(), type) << e.what();
  EXPECT_EQ(e.code(), code) << e.what();
  EXPECT_EQ(e.param(), param) << e.what();
}

TEST(ChatCompletionRequest, AMinimalRequestIsOneStreamedJobWithOpenAIDefaults) {
  RequestExtensions ext;
  ext.default_seed = 77;
  const GenerationRequest r = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}]})"), ext);
  EXPECT_EQ(r.endpoint, Endpoint::kChatCompletions);
  EXPECT_EQ(r.model, "qwen3");
  ASSERT_EQ(r.jobs.size(), 1u);
  const protocol::Job& job = r.jobs[0];
  EXPECT_TRUE(job.id.empty());
  EXPECT_TRUE(job.stream);
  EXPECT_EQ(job.model, "qwen3");
  EXPECT_EQ(job.temperature, 1);  // OpenAI's default, not the job map's greedy 0
  EXPECT_EQ(job.top_p, 1);
  EXPECT_EQ(job.top_k, 0);
  EXPECT_EQ(job.seed, 77u);
  EXPECT_EQ(job.max_tokens, 256);
  EXPECT_FALSE(job.tools.has_value());
  EXPECT_FALSE(job.chat_template_kwargs.has_value());
  EXPECT_TRUE(job.add_generation_prompt);
  ASSERT_EQ(messages_of(job).size(), 1u);
  EXPECT_EQ(messages_of(job)[0].role, "user");
  EXPECT_EQ(messages_of(job)[0].content, "hi");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.has_tools);
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::kNone);
  EXPECT_TRUE(r.parse_reasoning);
  EXPECT_FALSE(r.starts_in_reasoning);
  EXPECT_EQ(r.prompt_of_choice, std::vector<std::size_t>{0});
}

TEST(ChatCompletionRequest, EverySamplingFieldReachesEveryJob) {
  const GenerationRequest r = read(body(R"({
    "model": "qwen3", "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 100, "temperature": 0.25, "top_p": 0.5, "top_k": 40, "seed": 5, "stop": ["END", "\n\n"],
    "n": 3, "user": "u-123", "stream": true, "stream_options": {"include_usage": true, "include_obfuscation": false},
    "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}, "response_format": {"type": "text"},
    "logprobs": false, "top_logprobs": 0, "store": false, "modalities": ["text"], "service_tier": "auto",
    "stop_token_ids": [7, 8], "priority": -3, "deadline_ms": 5000, "spec": "off"})"));
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  for (std::size_t i = 0; i < 3; ++i) {
    const protocol::Job& job = r.jobs[i];
    EXPECT_EQ(job.max_tokens, 100);
    EXPECT_EQ(job.temperature, 0.25);
    EXPECT_EQ(job.top_p, 0.5);
    EXPECT_EQ(job.top_k, 40);
    EXPECT_EQ(job.seed, 5 + i) << "each choice samples with its own seed";
    EXPECT_EQ(job.stop, (std::vector<std::string>{"END", "\n\n"}));
    EXPECT_EQ(job.stop_token_ids, (protocol::TokenIds{7, 8}));
    EXPECT_EQ(job.priority, -3);
    EXPECT_EQ(job.deadline_ms, 5000);
    EXPECT_EQ(job.spec, protocol::SpecMode::kOff);
    EXPECT_TRUE(job.stream);
  }
  EXPECT_EQ(r.prompt_of_choice, (std::vector<std::size_t>{0, 0, 0}));
}

TEST(ChatCompletionRequest, StopAsOneStringMaxCompletionTokensAndNegativeSeeds) {
  GenerationRequest r = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}],
    "stop": "###", "max_completion_tokens": 42, "seed": -1, "top_k": -1})"));
  EXPECT_EQ(r.jobs[0].stop, std::vector<std::string>{"###"});
  EXPECT_EQ(r.jobs[0].max_tokens, 42);
  EXPECT_EQ(r.jobs[0].seed, ~std::uint64_t{0});
  EXPECT_EQ(r.jobs[0].top_k, 0);
  r = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 42, "max_completion_tokens": 42, "stop": null, "seed": null, "n": null})"));
  EXPECT_EQ(r.jobs[0].max_tokens, 42);
  EXPECT_TRUE(r.jobs[0].stop.empty());
  EXPECT_EQ(r.jobs.size(), 1u);
  expect_error(chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 42, "max_completion_tokens": 43})")),
               400, "invalid_request_error", "conflicting_values", "max_completion_tokens");
}

TEST(ChatCompletionRequest, HintsAndIdentifiersAreAcceptedAndChangeNothing) {
  const GenerationRequest plain = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]})"));
  const GenerationRequest hinted = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}],
    "safety_identifier": "s-1", "prompt_cache_key": "k", "prompt_cache_retention": "24h",
    "prompt_cache_options": {}, "service_tier": "default", "store": false, "parallel_tool_calls": true,
    "tool_choice": "auto", "stream": false, "stream_options": null, "logprobs": null, "response_format": null})"));
  EXPECT_EQ(hinted.jobs, plain.jobs);
  EXPECT_EQ(hinted.stream, plain.stream);
}

// `user` changes nothing about the generation, only where it runs: it names the job's session
// (the x-flashq-session header, when given, instead).
TEST(ChatCompletionRequest, TheUserOrTheSessionHeaderNamesTheJobsSession) {
  const json chat = body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "n": 2})");
  const GenerationRequest plain = read(chat);
  json with_user = chat;
  with_user["user"] = "u-1";
  GenerationRequest by_user = read(with_user);
  ASSERT_EQ(by_user.jobs.size(), 2u);
  for (protocol::Job& job : by_user.jobs) {
    EXPECT_EQ(job.session, "u-1") << "every choice";
    job.session.reset();
  }
  EXPECT_EQ(by_user.jobs, plain.jobs) << "nothing else changes";
  EXPECT_FALSE(plain.jobs[0].session.has_value());

  RequestExtensions ext;
  ext.session = "conversation-9";
  EXPECT_EQ(read(with_user, ext).jobs[0].session, "conversation-9") << "the header wins";
  with_user["user"] = "";
  EXPECT_FALSE(read(with_user).jobs[0].session.has_value()) << "empty is none";
  with_user["user"] = std::string(257, 'u');
  expect_error(chat_error(with_user), 400, "invalid_request_error", "invalid_value", "user");
  with_user["user"] = 7;
  expect_error(chat_error(with_user), 400, "invalid_request_error", "invalid_type", "user");
  ext.session = std::string(257, 's');
  try {
    read(chat, ext);
    ADD_FAILURE() << "a 257-byte session header was accepted";
  } catch (const ApiError& e) {
    expect_error(e, 400, "invalid_request_error", "invalid_value", "x-flashq-session");
  }
}

TEST(ChatCompletionRequest, TheGatewayDefaultMaxTokensApplies) {
  RequestExtensions ext;
  ext.default_max_tokens = 1000;
  EXPECT_EQ(read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]})"), ext).jobs[0].max_tokens,
            1000);
  // Cut to the model's context (4096) less the one token any prompt holds.
  ext.default_max_tokens = 5000;
  EXPECT_EQ(read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]})"), ext).jobs[0].max_tokens,
            4095);
  // A max_tokens that fills the context alone cannot fit: the worker need not be asked.
  const ApiError e =
      chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4096})"));
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "context_length_exceeded");
  EXPECT_EQ(e.param(), "max_tokens");
}

TEST(ChatCompletionRequest, HeadersAndBodyExtensionsAgreeOrAreRefused) {
  RequestExtensions ext;
  ext.priority = 4;
  ext.deadline_ms = 250;
  GenerationRequest r = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]})"), ext);
  EXPECT_EQ(r.jobs[0].priority, 4);
  EXPECT_EQ(r.jobs[0].deadline_ms, 250);
  r = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "priority": 4})"), ext);
  EXPECT_EQ(r.jobs[0].priority, 4);
  expect_error(
      chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "priority": 5})"), ext),
      400, "invalid_request_error", "conflicting_values", "priority");
  expect_error(
      chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "deadline_ms": 1})"), ext),
      400, "invalid_request_error", "conflicting_values", "deadline_ms");
  RequestExtensions bad;
  bad.deadline_ms = -1;
  expect_error(chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]})"), bad), 400,
               "invalid_request_error", "invalid_value", "deadline_ms");
  expect_error(
      chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "spec": "fast"})")), 400,
      "invalid_request_error", "invalid_value", "spec");
}

TEST(ChatCompletionRequest, MessagesInEveryOpenAIForm) {
  const GenerationRequest r = read(body(R"({"model": "qwen3", "messages": [
    {"role": "developer", "content": "be brief"},
    {"role": "system", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
    {"role": "user", "content": "weather?", "name": "ann"},
    {"role": "assistant", "content": null, "refusal": null, "annotations": [], "reasoning": "look it up",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "assistant", "content": "It is sunny.", "reasoning_content": "easy", "reasoning": "ignored"}]})"));
  const std::vector<protocol::ChatMessage>& m = messages_of(r.jobs[0]);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "system");  // developer is what system was
  EXPECT_EQ(m[0].content, "be brief");
  EXPECT_EQ(m[1].content, "one\ntwo");
  EXPECT_EQ(m[2].name, "ann");
  EXPECT_EQ(m[3].role, "assistant");
  EXPECT_FALSE(m[3].content.has_value());
  EXPECT_EQ(m[3].reasoning_content, "look it up");
  ASSERT_EQ(m[3].tool_calls.size(), 1u);
  EXPECT_EQ(m[3].tool_calls[0].id, "call_1");
  EXPECT_EQ(m[3].tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(m[3].tool_calls[0].arguments_json), "{\"city\": \"Paris\"}");
  EXPECT_EQ(m[4].role, "tool");
  EXPECT_EQ(m[4].tool_call_id, "call_1");
  EXPECT_EQ(m[4].content, "sunny");
  EXPECT_EQ(m[5].reasoning_content, "easy");  // reasoning_content wins over reasoning
}

TEST(ChatCompletionRequest, BadMessagesAreNamed) {
  struct Case {
    const char* messages;
    const char* code;
    const char* param;
  };
  for (const Case& c : std::vector<Case>{
           {R"([])", "invalid_value", "messages"},
           {R"("hi")", "invalid_value", "messages"},
           {R"([{"content": "x"}])", "missing_required_parameter", "messages[0].role"},
           {R"([{"role": "robot", "content": "x"}])", "invalid_value", "messages[0].role"},
           {R"([{"role": "user"}])", "missing_required_parameter", "messages[0].content"},
           {R"([{"role": "user", "content": 3}])", "invalid_type", "messages[0].content"},
           {R"([{"role": "tool", "content": "x"}])", "missing_required_parameter", "messages[0].tool_call_id"},
           {R"([{"role": "user", "content": "x", "mood": "happy"}])", "unrecognized_request_argument",
            "messages[0].mood"},
           {R"([{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": ""}}]}])",
            "invalid_value", "messages[0].tool_calls[0].function.name"},
           {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}])", "missing_required_parameter",
            "messages[0].tool_calls[0].function.arguments"},
           {R"([{"role": "user", "content": [{"text": "x"}]}])", "invalid_value", "messages[0].content[0].type"},
       }) {
    const ApiError e = chat_error(json{{"model", "qwen3"}, {"messages", json::parse(c.messages)}});
    expect_error(e, 400, "invalid_request_error", c.code, std::string(c.param));
  }
}

TEST(ChatCompletionRequest, ResponseFormatBecomesTheJobsStructuredOutput) {
  const auto with = [](const char* format) {
    return read(body(std::string(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "response_format": )") +
                     format + "}"));
  };
  EXPECT_FALSE(with(R"({"type": "text"})").jobs[0].structured_output);
  EXPECT_FALSE(with("null").jobs[0].structured_output);
  EXPECT_EQ(with(R"({"type": "json_object"})").jobs[0].structured_output, R"({"type":"json_object"})");
  const std::optional<std::string> schema =
      with(R"({"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": {"type": "object"}}})")
          .jobs[0]
          .structured_output;
  ASSERT_TRUE(schema);
  EXPECT_EQ(json::parse(*schema), json::parse(R"({"type": "json_schema", "schema": {"type": "object"}})"));
  for (const char* bad : {R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}})",
                          R"({"type": "json_schema", "json_schema": {"name": "x"}})", R"({"type": "xml"})", R"("json")"}) {
    const ApiError e = chat_error(body(std::string(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "response_format": )") +
                                       bad + "}"));
    expect_error(e, 400, "invalid_request_error", "invalid_value", std::string("response_format"));
  }
  const ApiError named = chat_error(body(
      R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "patternProperties": {}}}}})"));
  EXPECT_NE(std::string(named.what()).find("patternProperties"), std::string::npos) << named.what();
}

TEST(ChatCompletionRequest, VllmsGuidedFieldsAreStructuredOutputs) {
  const auto output_of = [](const std::string& fields) {
    return read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], )" + fields + "}"))
        .jobs[0]
        .structured_output;
  };
  const auto parsed = [](const std::optional<std::string>& output) { return json::parse(output.value_or("null")); };
  EXPECT_EQ(parsed(output_of(R"("guided_json": {"type": "integer"})")),
            json::parse(R"({"type": "json_schema", "schema": {"type": "integer"}})"));
  EXPECT_EQ(parsed(output_of(R"("guided_json": "{\"type\": \"integer\"}")")),
            json::parse(R"({"type": "json_schema", "schema": {"type": "integer"}})"));
  EXPECT_EQ(parsed(output_of(R"("guided_regex": "[0-9]+")")), json::parse(R"({"type": "regex", "pattern": "[0-9]+"})"));
  EXPECT_EQ(parsed(output_of(R"("guided_choice": ["yes", "no"])")),
            json::parse(R"({"type": "choice", "choices": ["yes", "no"]})"));
  EXPECT_EQ(parsed(output_of(R"("guided_grammar": "root ::= \"a\"")")),
            json::parse(R"({"type": "grammar", "grammar": "root ::= \"a\""})"));
  EXPECT_EQ(parsed(output_of(R"("structured_outputs": {"choice": ["a", "b"]})")),
            json::parse(R"({"type": "choice", "choices": ["a", "b"]})"));
  EXPECT_EQ(parsed(output_of(R"("structured_outputs": {"json_object": true})")), json::parse(R"({"type": "json_object"})"));

  struct Bad {
    const char* fields;
    const char* code;
    const char* param;
  };
  for (const Bad& c : std::vector<Bad>{
           {R"("guided_regex": "a", "guided_choice": ["a"])", "conflicting_values", "guided_choice"},
           {R"("guided_regex": "a", "response_format": {"type": "json_object"})", "conflicting_values", "response_format"},
           {R"("guided_choice": [])", "invalid_value", "guided_choice"},
           {R"("guided_choice": [1])", "invalid_type", "guided_choice"},
           {R"("guided_json": "{not json")", "invalid_value", "guided_json"},
           {R"("guided_json": {"type": "object", "if": {}})", "invalid_value", "guided_json"},
           {R"("guided_grammar": "root ::= undefined_rule")", "invalid_value", "guided_grammar"},
           {R"("structured_outputs": {"regex": "a", "choice": ["a"]})", "conflicting_values", "structured_outputs"},
           {R"("structured_outputs": {"xml": "a"})", "unsupported_parameter", "structured_outputs"},
           {R"("structured_outputs": {})", "invalid_value", "structured_outputs"},
       }) {
    const ApiError e = chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], )" +
                                       std::string(c.fields) + "}"));
    expect_error(e, 400, "invalid_request_error", c.code, std::string(c.param));
  }
}

TEST(ChatCompletionRequest, LogprobsAskEachJobForThatManyCandidates) {
  const auto logprobs_of = [](const char* fields) {
    const std::string text = std::string(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "n": 2)") +
                             fields + "}";
    const GenerationRequest request = read_chat_completion_request(body(text), test_models(), {});
    EXPECT_EQ(request.jobs.at(0).logprobs, request.jobs.at(1).logprobs) << "every choice alike";
    return request.jobs.at(0).logprobs;
  };
  EXPECT_EQ(logprobs_of(R"(, "logprobs": true, "top_logprobs": 20)"), 20);
  EXPECT_EQ(logprobs_of(R"(, "logprobs": true)"), 0);
  EXPECT_EQ(logprobs_of(""), std::nullopt);
  EXPECT_EQ(logprobs_of(R"(, "logprobs": false, "top_logprobs": 0)"), std::nullopt);
  EXPECT_EQ(logprobs_of(R"(, "logprobs": null, "top_logprobs": null)"), std::nullopt);
  for (const char* bad : {R"("logprobs": true, "top_logprobs": 21)", R"("logprobs": true, "top_logprobs": -1)",
                          R"("top_logprobs": 3)", R"("logprobs": false, "top_logprobs": 1)"}) {
    const ApiError e = chat_error(body(std::string(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], )") +
                                       bad + "}"));
    EXPECT_EQ(e.status(), 400) << bad;
    EXPECT_EQ(e.code(), "invalid_value") << bad << ": " << e.what();
    EXPECT_EQ(e.param(), "top_logprobs") << bad;
  }
  EXPECT_EQ(chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "logprobs": 1})"))
                .param(),
            "logprobs");
}

TEST(ChatCompletionRequest, UnsupportedFieldsAreRefusedByName) {
  struct Case {
    const char* field;
    const char* value;
  };
  for (const Case& c : std::vector<Case>{
           {"presence_penalty", "0.5"},
           {"frequency_penalty", "-1"},
           {"logit_bias", R"({"50256": -100})"},
           {"audio", R"({"voice": "alloy", "format": "mp3"})"},
           {"modalities", R"(["text", "audio"])"},
           {"functions", R"([{"name": "f"}])"},
           {"function_call", R"("auto")"},
           {"prediction", R"({"type": "content", "content": "x"})"},
           {"reasoning_effort", R"("low")"},
           {"verbosity", R"("low")"},
           {"web_search_options", R"({})"},
           {"store", "true"},
           {"metadata", R"({"a": "b"})"},
       }) {
    json b = body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]})");
    b[c.field] = json::parse(c.value);
    expect_error(chat_error(b), 400, "invalid_request_error", "unsupported_parameter", std::string(c.field));
  }
  // Image and audio content parts and custom tools are refused where they stand (strict functions
  // are served: strict_tools_request_test.cpp).
  expect_error(chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": [
      {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]})")),
               400, "invalid_request_error", "unsupported_parameter", "messages[0].content[1].type");
  expect_error(chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": [
      {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]})")),
               400, "invalid_request_error", "unsupported_parameter", "messages[0].content[0].type");
  expect_error(chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "custom", "custom": {"name": "grammar"}}]})")),
               400, "invalid_request_error", "unsupported_parameter", "tools[0].type");
  expect_error(
      chat_error(body(R"({"model": "qwen3", "messages": [{"role": "function", "name": "f", "content": "x"}]})")), 400,
      "invalid_request_error", "unsupported_parameter", "messages[0].role");
}

TEST(ChatCompletionRequest, UnknownFieldsAndBadValuesAre400) {
  expect_error(
      chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "temprature": 1})")), 400,
      "invalid_request_error", "unrecognized_request_argument", "temprature");
  expect_error(chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}],
      "stream": true, "stream_options": {"include_usage": true, "chunk": 1}})")),
               400, "invalid_request_error", "unrecognized_request_argument", "stream_options.chunk");
  expect_error(chat_error(body(R"([1, 2])")), 400, "invalid_request_error", "invalid_value", std::nullopt);
  struct Case {
    const char* field;
    const char* value;
    const char* code;
  };
  for (const Case& c : std::vector<Case>{
           {"temperature", "2.5", "invalid_value"},
           {"temperature", "-0.1", "invalid_value"},
           {"temperature", R"("hot")", "invalid_type"},
           {"top_p", "0", "invalid_value"},
           {"top_p", "1.5", "invalid_value"},
           {"max_tokens", "0", "invalid_value"},
           {"max_tokens", "1.5", "invalid_type"},
           {"max_completion_tokens", "2000000", "invalid_value"},
           {"n", "0", "invalid_value"},
           {"n", "129", "invalid_value"},
           {"stop", "5", "invalid_type"},
           {"stop", R"([""])", "invalid_value"},
           {"stop", R"(["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])", "invalid_value"},
           {"stream", R"("yes")", "invalid_type"},
           {"seed", "1.5", "invalid_type"},
           {"stream_options", R"({"include_usage": true})", "invalid_value"},
           {"chat_template_kwargs", R"({"tools": []})", "invalid_value"},
           {"chat_template_kwargs", "[1]", "invalid_value"},
           {"parallel_tool_calls", "1", "invalid_type"},
           {"stop_token_ids", "[-1]", "invalid_value"},
           {"priority", "3000000000", "invalid_value"}}) {
    json b = body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]})");
    b[c.field] = json::parse(c.value);
    expect_error(chat_error(b), 400, "invalid_request_error", c.code, std::string(c.field));
  }
}

TEST(ChatCompletionRequest, AnUnknownModelIs404) {
  expect_error(chat_error(body(R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})")), 404,
               "invalid_request_error", "model_not_found", "model");
  expect_error(chat_error(body(R"({"messages": [{"role": "user", "content": "x"}]})")), 400, "invalid_request_error",
               "missing_required_parameter", "model");
}

TEST(ChatCompletionRequest, ToolsAndToolChoiceReachTheTemplate) {
  const std::string tools =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": false}},
          {"type": "function", "function": {"name": "get_time"}}])";
  GenerationRequest r = read(json{{"model", "qwen3"},
                                  {"messages", json::array({{{"role", "user"}, {"content", "x"}}})},
                                  {"tools", json::parse(tools)},
                                  {"parallel_tool_calls", false}});
  EXPECT_TRUE(r.has_tools);
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::kAuto);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.output_format.tool_calls, ToolCallFormat::kHermes);
  ASSERT_TRUE(r.jobs[0].tools.has_value());
  // Key by key as written (type before function, name before description): the template renders
  // them in this order.
  EXPECT_EQ(*r.jobs[0].tools, json::parse(tools).dump());
  EXPECT_LT(r.jobs[0].tools->find("\"type\""), r.jobs[0].tools->find("\"function\""));

  // A named function: the template is given only that one.
  r = read(json{{"model", "qwen3"},
                {"messages", json::array({{{"role", "user"}, {"content", "x"}}})},
                {"tools", json::parse(tools)},
                {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}});
  EXPECT_EQ(r.tool_choice, (ToolChoice{ToolChoiceMode::kNamed, "get_time"}));
  EXPECT_EQ(json::parse(*r.jobs[0].tools), json::array({json::parse(tools)[1]}));

  // none: the model is not told of tools it may not call, and its output is not parsed for calls.
  r = read(json{{"model", "qwen3"},
                {"messages", json::array({{{"role", "user"}, {"content", "x"}}})},
                {"tools", json::parse(tools)},
                {"tool_choice", "none"}});
  EXPECT_FALSE(r.has_tools);
  EXPECT_FALSE(r.jobs[0].tools.has_value());

  r = read(json{{"model", "llama"},
                {"messages", json::array({{{"role", "user"}, {"content", "x"}}})},
                {"tools", json::parse(tools)},
                {"tool_choice", "required"}});
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::kRequired);
  EXPECT_EQ(r.output_format.tool_calls, ToolCallFormat::kLlama3Json);

  // An empty tools array is no tools.
  r = read(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "tools": []})"));
  EXPECT_FALSE(r.has_tools);
}

TEST(ChatCompletionRequest, ToolRefusals) {
  const json messages = json::array({{{"role", "user"}, {"content", "x"}}});
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  // A model whose tool-call format no parser reads.
  expect_error(chat_error(json{{"model", "plain"}, {"messages", messages}, {"tools", tools}}), 400,
               "invalid_request_error", "unsupported_parameter", "tools");
  // ... unless the request does not let it call them.
  EXPECT_FALSE(
      read(json{{"model", "plain"}, {"messages", messages}, {"tools", tools}, {"tool_choice", "none"}}).has_tools);
  expect_error(chat_error(json{{"model", "qwen3"},
                               {"messages", messages},
                               {"tools", tools},
                               {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}),
               400, "invalid_request_error", "invalid_value", "tool_choice");
  expect_error(
      chat_error(json{{"model", "qwen3"}, {"messages", messages}, {"tools", tools}, {"tool_choice", "always"}}), 400,
      "invalid_request_error", "invalid_value", "tool_choice");
  expect_error(chat_error(json{{"model", "qwen3"}, {"messages", messages}, {"tool_choice", "required"}}), 400,
               "invalid_request_error", "invalid_value", "tool_choice");
  expect_error(chat_error(json{{"model", "qwen3"}, {"messages", messages}, {"tools", json::object()}}), 400,
               "invalid_request_error", "invalid_type", "tools");
  expect_error(
      chat_error(json{{"model", "qwen3"}, {"messages", messages}, {"tools", json::parse(R"([{"type": "function"}])")}}),
      400, "invalid_request_error", "missing_required_parameter", "tools[0].function");
  expect_error(chat_error(json{{"model", "qwen3"},
                               {"messages", messages},
                               {"tools", json::parse(R"([{"type": "function", "function": {"name": "f", "x": 1}}])")}}),
               400, "invalid_request_error", "unrecognized_request_argument", "tools[0].function.x");
}

TEST(ChatCompletionRequest, ChatTemplateOptionsAndReasoning) {
  GenerationRequest r = read(body(R"({"model": "qwen3-thinking", "messages": [{"role": "user", "content": "x"}]})"));
  EXPECT_TRUE(r.starts_in_reasoning);
  EXPECT_TRUE(r.parse_reasoning);
  r = read(body(R"({"model": "qwen3-thinking", "messages": [{"role": "user", "content": "x"}],
      "chat_template_kwargs": {"enable_thinking": false, "date_string": "26 Jul 2024"}})"));
  EXPECT_FALSE(r.starts_in_reasoning);
  EXPECT_EQ(json::parse(*r.jobs[0].chat_template_kwargs),
            body(R"({"enable_thinking": false, "date_string": "26 Jul 2024"})"));
  r = read(body(R"({"model": "qwen3-thinking", "messages": [{"role": "user", "content": "x"}],
      "add_generation_prompt": false})"));
  EXPECT_FALSE(r.jobs[0].add_generation_prompt);
  EXPECT_FALSE(r.starts_in_reasoning);
  r = read(body(R"({"model": "llama", "messages": [{"role": "user", "content": "x"}]})"));
  EXPECT_FALSE(r.parse_reasoning);
}

TEST(ChatCompletionRequest, TheJobMapsLimitsAre400s) {
  const std::string long_id(300, 'c');
  const ApiError e = chat_error(
      json{{"model", "qwen3"},
           {"messages",
            json::array({{{"role", "assistant"},
                          {"tool_calls", json::array({{{"id", long_id},
                                                       {"type", "function"},
                                                       {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}}})}});
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.type(), "invalid_request_error");
  EXPECT_NE(std::string(e.what()).find("messages[0].tool_calls[0].id"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace flashq::gateway
