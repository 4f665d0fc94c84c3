// Chat completion chunks and whole responses from job events: the chunk sequence OpenAI's clients
// expect, content / reasoning / tool calls in each family's real format split at every point (the
// streamed deltas accumulate to the whole response's message), usage, n, finish reasons, errors.
#include "gateway/openai/chat_completion_stream.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/gateway/openai_test_support.h"

namespace flashq::gateway {
namespace {

using nlohmann::json;
using testing::AccumulatedChat;
using testing::body;
using testing::job_events;
using testing::test_models;

constexpr std::int64_t kCreated = 1767225600;

GenerationRequest chat_request(const std::string& model, bool stream, const std::string& extra = "") {
  std::string text = R"({"model": ")" + model + R"(", "messages": [{"role": "user", "content": "hi"}], "stream": )" +
                     (stream ? "true" : "false") + extra + "}";
  return read_chat_completion_request(body(text), test_models(), {});
}

const std::string kTools = R"(, "tools": [{"type": "function", "function": {"name": "get_weather"}},
                                          {"type": "function", "function": {"name": "get_time"}}])";

// Every chunk of a streamed chat of one choice per job, the choices' events fed in turn.
std::vector<std::string> stream_chunks(ChatCompletionRenderer& renderer,
                                       const std::vector<std::vector<protocol::Event>>& jobs) {
  std::vector<std::string> chunks;
  std::size_t longest = 0;
  for (const auto& events : jobs) longest = std::max(longest, events.size());
  for (std::size_t step = 0; step < longest; ++step) {
    for (std::size_t choice = 0; choice < jobs.size(); ++choice) {
      if (step >= jobs[choice].size()) continue;
      for (std::string& c : renderer.on_event(choice, jobs[choice][step])) chunks.push_back(std::move(c));
    }
  }
  for (std::string& c : renderer.finish()) chunks.push_back(std::move(c));
  return chunks;
}

AccumulatedChat accumulate(const std::vector<std::string>& chunks, const std::string& id, const std::string& model) {
  AccumulatedChat chat;
  for (const std::string& c : chunks) testing::accumulate_chat_chunk(chat, c, id, kCreated, model);
  return chat;
}

json whole_response(const std::string& model, const std::string& extra, const std::vector<std::string>& pieces,
                    protocol::FinishReason reason = protocol::FinishReason::kStop) {
  ChatCompletionRenderer renderer(chat_request(model, false, extra), {"job-1"}, kCreated);
  for (const protocol::Event& e : job_events(pieces, reason)) EXPECT_TRUE(renderer.on_event(0, e).empty());
  EXPECT_TRUE(renderer.done());
  EXPECT_TRUE(renderer.finish().empty());
  return json::parse(renderer.response());
}

// The streamed message accumulated, in the whole response's shape.
json accumulated_message(const testing::AccumulatedChoice& c) {
  json m = {{"role", "assistant"}};
  m["content"] = c.content.empty() && !c.tool_calls.empty() ? json() : json(c.content);
  m["refusal"] = nullptr;
  m["reasoning"] = c.reasoning.empty() ? json() : json(c.reasoning);
  m["reasoning_content"] = c.reasoning_content.empty() ? json() : json(c.reasoning_content);
  if (!c.tool_calls.empty()) m["tool_calls"] = c.tool_calls;
  return m;
}

// Streams `text` cut into these pieces and checks the accumulation equals the whole response.
void expect_stream_matches_response(const std::string& model, const std::string& extra,
                                    const std::vector<std::string>& pieces, const json& response) {
  ChatCompletionRenderer renderer(chat_request(model, true, extra), {"job-1"}, kCreated);
  const AccumulatedChat chat = accumulate(stream_chunks(renderer, {job_events(pieces)}), "job-1", model);
  ASSERT_EQ(chat.choices.size(), 1u);
  EXPECT_EQ(accumulated_message(chat.choices[0]), response["choices"][0]["message"]);
  EXPECT_EQ(chat.choices[0].finish_reason, response["choices"][0]["finish_reason"].get<std::string>());
  EXPECT_EQ(chat.usage_chunks, 0);
}

// The text split once at every byte, in 1-byte pieces, and in random pieces (fixed seeds).
std::vector<std::vector<std::string>> every_split(const std::string& text) {
  std::vector<std::vector<std::string>> splits;
  for (std::size_t at = 0; at <= text.size(); ++at) splits.push_back({text.substr(0, at), text.substr(at)});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  splits.push_back(bytes);
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::vector<std::string> pieces;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 9)(rng);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    splits.push_back(pieces);
  }
  return splits;
}

TEST(ChatCompletionStream, ContentStreamsAsOpenAIChunks) {
  ChatCompletionRenderer renderer(chat_request("plain", true), {"job-7"}, kCreated);
  std::vector<std::string> chunks = stream_chunks(renderer, {job_events({"Hel", "lo", "", " world", ""})});
  ASSERT_EQ(chunks.size(), 5u);  // role, 3 with content (an empty event sends nothing), the finish
  const json first = json::parse(chunks[0]);
  EXPECT_EQ(first, json::parse(R"({"id": "job-7", "object": "chat.completion.chunk", "created": 1767225600,
      "model": "plain", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null,
      "finish_reason": null}]})"));
  EXPECT_EQ(json::parse(chunks[1])["choices"][0]["delta"], json::parse(R"({"content": "Hel"})"));
  EXPECT_EQ(json::parse(chunks[3])["choices"][0]["delta"], json::parse(R"({"content": " world"})"));
  const json last = json::parse(chunks[4]);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage")) << "usage appears only when the request asks for it";
  EXPECT_TRUE(renderer.done());
  EXPECT_FALSE(renderer.failure().has_value());
  EXPECT_EQ(renderer.id(), "job-7");
}

TEST(ChatCompletionStream, AWholeResponseHasOpenAIsShape) {
  const json r = whole_response("plain", "", {"Hello", " world"});
  EXPECT_EQ(r, json::parse(R"({"id": "job-1", "object": "chat.completion", "created": 1767225600, "model": "plain",
      "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello world", "refusal": null,
      "reasoning": null, "reasoning_content": null}, "logprobs": null, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})"));
}

TEST(ChatCompletionStream, LogprobsOfEachEventAndTokensThatAreNotWholeCharacters) {
  // "é" is two bytes; a tokenizer may split it between two tokens, each not UTF-8 alone.
  std::vector<protocol::Event> events = job_events({"caf", "\xc3\xa9"});
  events[0].token_ids = {5};
  events[0].logprobs = {{{5, -0.25, "caf"}, {{5, -0.25, "caf"}, {6, -2.0, "cat"}}}};
  events[1].token_ids = {7, 8};
  events[1].logprobs = {{{7, -1.0, "\xc3"}, {{7, -1.0, "\xc3"}, {9, -1.5, "s"}}}, {{8, 0.0, "\xa9"}, {{8, 0.0, "\xa9"}, {1, -30.0, "x"}}}};
  ChatCompletionRenderer whole(chat_request("plain", false, R"(, "logprobs": true, "top_logprobs": 2)"), {"job-1"}, kCreated);
  for (const protocol::Event& e : events) whole.on_event(0, e);
  const json content = json::parse(whole.response())["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0], json::parse(R"({"token": "caf", "logprob": -0.25, "bytes": [99, 97, 102], "top_logprobs": [
      {"token": "caf", "logprob": -0.25, "bytes": [99, 97, 102]}, {"token": "cat", "logprob": -2.0, "bytes": [99, 97, 116]}]})"));
  EXPECT_EQ(content[1]["token"], "bytes:\\xc3");
  EXPECT_EQ(content[1]["bytes"], json::parse("[195]"));
  EXPECT_EQ(content[2]["token"], "bytes:\\xa9");

  ChatCompletionRenderer streamed(chat_request("plain", true, R"(, "logprobs": true, "top_logprobs": 2)"), {"job-1"}, kCreated);
  json pieces = json::array();
  for (const std::string& chunk : stream_chunks(streamed, {events})) {
    const json choice = json::parse(chunk)["choices"][0];
    if (choice["logprobs"].is_null()) continue;
    for (const json& entry : choice["logprobs"]["content"]) pieces.push_back(entry);
    EXPECT_TRUE(choice["logprobs"]["refusal"].is_null());
  }
  EXPECT_EQ(pieces, content);
}

TEST(ChatCompletionStream, Qwen3ReasoningGoesToReasoningInEverySplit) {
  const std::string text = "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?";
  const json response = whole_response("qwen3", "", {text});
  const json& message = response["choices"][0]["message"];
  EXPECT_NE(message["reasoning"].get<std::string>().find("The user greets me."), std::string::npos);
  EXPECT_EQ(message["reasoning"], message["reasoning_content"]);
  EXPECT_EQ(message["content"], "Hello! How can I help?");
  for (const auto& pieces : every_split(text)) expect_stream_matches_response("qwen3", "", pieces, response);
  // A checkpoint whose prompt opens <think> writes no opening tag.
  const json thinking = whole_response("qwen3-thinking", "", {"plan\n</think>\n\nanswer"});
  EXPECT_EQ(thinking["choices"][0]["message"]["content"], "answer");
  EXPECT_NE(thinking["choices"][0]["message"]["reasoning"].get<std::string>().find("plan"), std::string::npos);
}

TEST(ChatCompletionStream, HermesToolCallsInEverySplit) {
  const std::string text =
      "<think>\nI need the weather and the time.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>";
  const json response = whole_response("qwen3", kTools, {text});
  const json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& calls = choice["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["id"], "call_job-1_0");
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city": "Paris", "unit": "celsius"})"));
  EXPECT_EQ(calls[1]["id"], "call_job-1_1");
  EXPECT_EQ(calls[1]["function"]["name"], "get_time");
  EXPECT_EQ(choice["message"]["content"], "Let me check.");
  EXPECT_NE(choice["message"]["reasoning"].get<std::string>().find("weather and the time"), std::string::npos);
  for (const auto& pieces : every_split(text)) expect_stream_matches_response("qwen3", kTools, pieces, response);
}

TEST(ChatCompletionStream, Llama3JsonToolCallsInEverySplit) {
  const std::string text =
      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
      "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}";
  const json response = whole_response("llama", kTools, {text});
  const json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null()) << "a message that only calls tools has content null";
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(choice["message"]["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_TRUE(choice["message"]["reasoning"].is_null());
  for (const auto& pieces : every_split(text)) expect_stream_matches_response("llama", kTools, pieces, response);
}

TEST(ChatCompletionStream, HarmonyChannelsAndToolCallsInEverySplit) {
  // gpt-oss: the analysis channel, a preamble on commentary, then a call (its <|call|> is an
  // end-of-sequence token the worker does not send).
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"city\":\"Paris\"}";
  const json response = whole_response("gpt-oss", kTools, {text});
  const json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  EXPECT_EQ(choice["message"]["reasoning"], "Need the weather.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["id"], "call_job-1_0");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  for (const auto& pieces : every_split(text)) expect_stream_matches_response("gpt-oss", kTools, pieces, response);
  // Without tools the answer is the final channel's.
  const json answer = whole_response(
      "gpt-oss", "", {"<|channel|>analysis<|message|>Greeting.<|end|><|start|>assistant<|channel|>final<|message|>Hi!"});
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "Hi!");
  EXPECT_EQ(answer["choices"][0]["message"]["reasoning"], "Greeting.");
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop");
}

TEST(ChatCompletionStream, ParallelToolCallsFalseKeepsTheFirstCall) {
  const std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const std::string extra = kTools + R"(, "parallel_tool_calls": false)";
  const json response = whole_response("qwen3", extra, {text});
  ASSERT_EQ(response["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(response["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  for (const auto& pieces : every_split(text)) expect_stream_matches_response("qwen3", extra, pieces, response);
}

TEST(ChatCompletionStream, ToolChoiceNoneLeavesCallsInTheContent) {
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
  const json response = whole_response("qwen3", kTools + R"(, "tool_choice": "none")", {text});
  EXPECT_EQ(response["choices"][0]["message"]["content"], text);
  EXPECT_FALSE(response["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(response["choices"][0]["finish_reason"], "stop");
}

TEST(ChatCompletionStream, AnUnmetRequiredToolChoiceIsAnsweredAsWritten) {
  const json response = whole_response("qwen3", kTools + R"(, "tool_choice": "required")", {"I cannot call tools."});
  EXPECT_EQ(response["choices"][0]["message"]["content"], "I cannot call tools.");
  EXPECT_EQ(response["choices"][0]["finish_reason"], "stop");
}

TEST(ChatCompletionStream, LengthIsLengthUnlessACallIsComplete) {
  EXPECT_EQ(whole_response("plain", "", {"cut sho"}, protocol::FinishReason::kLength)["choices"][0]["finish_reason"],
            "length");
  const json cut = whole_response("qwen3", kTools, {"<tool_call>\n{\"name\": \"get_weather\", \"argu"},
                                  protocol::FinishReason::kLength);
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(cut["choices"][0]["message"].contains("tool_calls")) << "a call cut short is content";
}

TEST(ChatCompletionStream, UsageChunkAndNullUsageOnEveryOtherChunk) {
  ChatCompletionRenderer renderer(chat_request("plain", true, R"(, "n": 2, "stream_options": {"include_usage": true})"),
                                  {"job-a", "job-b"}, kCreated);
  const std::vector<std::string> chunks =
      stream_chunks(renderer, {job_events({"one", " two"}, protocol::FinishReason::kStop, {12, 2}),
                               job_events({"three", " four", " five"}, protocol::FinishReason::kLength, {12, 3})});
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    const json c = json::parse(chunks[i]);
    ASSERT_TRUE(c.contains("usage"));
    EXPECT_TRUE(c["usage"].is_null());
    EXPECT_EQ(c["id"], "job-a") << "every chunk has choice 0's job id";
  }
  const json last = json::parse(chunks.back());
  EXPECT_EQ(last["choices"], json::array());
  // The prompt counted once, as OpenAI counts n choices; the completions summed.
  EXPECT_EQ(last["usage"], json::parse(R"({"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17})"));
  const AccumulatedChat chat = accumulate(chunks, "job-a", "plain");
  ASSERT_EQ(chat.choices.size(), 2u);
  EXPECT_EQ(chat.choices[0].content, "one two");
  EXPECT_EQ(chat.choices[0].finish_reason, "stop");
  EXPECT_EQ(chat.choices[1].content, "three four five");
  EXPECT_EQ(chat.choices[1].finish_reason, "length");
  EXPECT_EQ(chat.usage_chunks, 1);
}

TEST(ChatCompletionStream, NChoicesInOneWholeResponse) {
  ChatCompletionRenderer renderer(chat_request("plain", false, R"(, "n": 2)"), {"job-a", "job-b"}, kCreated);
  for (const protocol::Event& e : job_events({"b"}, protocol::FinishReason::kStop, {7, 1})) renderer.on_event(1, e);
  EXPECT_FALSE(renderer.done());
  for (const protocol::Event& e : job_events({"a"}, protocol::FinishReason::kStop, {7, 4})) renderer.on_event(0, e);
  const json r = json::parse(renderer.response());
  EXPECT_EQ(r["id"], "job-a");
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["choices"][0]["index"], 0);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "a");
  EXPECT_EQ(r["choices"][1]["index"], 1);
  EXPECT_EQ(r["choices"][1]["message"]["content"], "b");
  EXPECT_EQ(r["usage"], json::parse(R"({"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12})"));
}

TEST(ChatCompletionStream, ARepeatedEventIsTakenOnce) {
  ChatCompletionRenderer renderer(chat_request("plain", true), {"job-1"}, kCreated);
  const std::vector<protocol::Event> events = job_events({"a", "b", "c"});
  EXPECT_EQ(renderer.on_event(0, events[0]).size(), 2u);
  EXPECT_EQ(renderer.on_event(0, events[1]).size(), 1u);
  EXPECT_TRUE(renderer.on_event(0, events[0]).empty()) << "a replayed event";
  EXPECT_TRUE(renderer.on_event(0, events[1]).empty());
  EXPECT_EQ(renderer.choices().next_seq(0), 2);
  EXPECT_EQ(renderer.on_event(0, events[2]).size(), 1u);
  EXPECT_TRUE(renderer.on_event(0, events[2]).empty()) << "nothing after the final";
  EXPECT_EQ(json::parse(renderer.response())["choices"][0]["message"]["content"], "abc");
}

TEST(ChatCompletionStream, JobsThatEndWithoutACompletionAreErrors) {
  struct Case {
    protocol::FinishReason reason;
    int status;
    const char* type;
    const char* code;
  };
  for (const Case& c :
       std::vector<Case>{{protocol::FinishReason::kCancelled, 499, "invalid_request_error", "cancelled"},
                         {protocol::FinishReason::kDeadline, 504, "server_error", "timeout"},
                         {protocol::FinishReason::kError, 500, "server_error", "server_error"},
                         {protocol::FinishReason::kRejected, 400, "invalid_request_error", "job_rejected"}}) {
    // Streamed: the chunks so far, then the error object as the last payload.
    ChatCompletionRenderer streamed(chat_request("plain", true, R"(, "n": 2)"), {"job-a", "job-b"}, kCreated);
    EXPECT_EQ(streamed.on_event(0, job_events({"partial"})[0]).size(), 2u);
    const std::vector<protocol::Event> failing = job_events({"x"}, c.reason, {3, 1}, "why it ended");
    const std::vector<std::string> out = streamed.on_event(1, failing[0]);
    ASSERT_EQ(out.size(), 1u);
    const json error = json::parse(out[0]);
    EXPECT_EQ(error["error"]["type"], c.type);
    EXPECT_EQ(error["error"]["code"], c.code);
    EXPECT_NE(error["error"]["message"].get<std::string>().find("job-b"), std::string::npos);
    EXPECT_NE(error["error"]["message"].get<std::string>().find("why it ended"), std::string::npos);
    ASSERT_TRUE(streamed.failure().has_value());
    EXPECT_EQ(streamed.failure()->status(), c.status);
    EXPECT_TRUE(streamed.done());
    EXPECT_TRUE(streamed.on_event(0, job_events({"more"})[0]).empty()) << "nothing after the failure";
    EXPECT_TRUE(streamed.finish().empty());

    // Whole: response() throws the error.
    ChatCompletionRenderer whole(chat_request("plain", false), {"job-1"}, kCreated);
    EXPECT_TRUE(whole.on_event(0, job_events({}, c.reason)[0]).empty());
    try {
      (void)whole.response();
      ADD_FAILURE() << "no error for " << protocol::finish_reason_name(c.reason);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), c.status);
      EXPECT_EQ(e.code(), c.code);
    }
  }
}

TEST(ChatCompletionStream, ACharacterSplitBetweenEventsWaitsForItsEnd) {
  EXPECT_EQ(complete_utf8_prefix("caf\xC3"), 3u);
  EXPECT_EQ(complete_utf8_prefix("caf\xC3\xA9"), 5u);
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(complete_utf8_prefix("ok"), 2u);
  ChatCompletionRenderer renderer(chat_request("plain", true), {"job-1"}, kCreated);
  std::vector<std::string> chunks = stream_chunks(renderer, {job_events({"caf\xC3", "\xA9 \xF0\x9F", "\x98\x80", ""})});
  const AccumulatedChat chat = accumulate(chunks, "job-1", "plain");
  EXPECT_EQ(chat.choices.at(0).content, "caf\xC3\xA9 \xF0\x9F\x98\x80");
  for (const std::string& c : chunks) EXPECT_EQ(c.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD in " << c;
}

TEST(ChatCompletionStream, AModelThatLostItsWorkersIs503) {
  ChatCompletionRenderer renderer(chat_request("plain", false), {"job-1"}, kCreated);
  renderer.on_event(0, job_events({}, protocol::FinishReason::kRejected, {0, 0},
                                  "no worker serves model 'plain'; models served: none")[0]);
  ASSERT_TRUE(renderer.failure().has_value());
  EXPECT_EQ(renderer.failure()->status(), 503);
  EXPECT_EQ(renderer.failure()->type(), "server_error");
  EXPECT_EQ(renderer.failure()->code(), "model_unavailable");
  EXPECT_GT(renderer.failure()->retry_after_s(), 0);
}

TEST(ChatCompletionStream, ARendererNeedsOneJobIdPerChoice) {
  EXPECT_THROW(ChatCompletionRenderer(chat_request("plain", true, R"(, "n": 2)"), {"job-a"}, kCreated), Error);
}

}  // namespace
}  // namespace flashq::gateway
