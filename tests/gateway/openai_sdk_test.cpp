// The renderers' output read by the official OpenAI SDK for Node (tests/gateway/openai_sdk_read.mjs):
// whole responses come back as written, streamed chat chunks accumulate (by the SDK's own
// ChatCompletionStream) to the whole response's message, and each error reaches the client as
// the error class, status, code and param it names, retried only where a retry can succeed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "gateway/openai/chat_completion_stream.h"
#include "gateway/openai/completion_stream.h"
#include "tests/gateway/openai_test_support.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace flashq::gateway {
namespace {

using nlohmann::json;
using testing::body;
using testing::job_events;
using testing::test_models;

constexpr std::int64_t kCreated = 1767225600;
constexpr const char* kSdk = "third_party/npm/node_modules/openai/package.json";

// A stream as the server writes it: each payload a `data:` line, then [DONE] unless it failed.
std::string sse(const std::vector<std::string>& payloads, bool failed) {
  std::string out;
  for (const std::string& p : payloads) out += "data: " + p + "\n\n";
  if (!failed) out += "data: [DONE]\n\n";
  return out;
}

// Random pieces of a text (fixed seed): the events a worker might send.
std::vector<std::string> random_pieces(const std::string& text, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> pieces;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 7)(rng);
    pieces.push_back(text.substr(at, n));
    at += n;
  }
  pieces.emplace_back();  // the final event, with no text
  return pieces;
}

// The case's jobs are named job-<base>-<choice>, base being the name up to its first '-': a
// streamed case and a whole one of the same base have the same ids.
template <typename Renderer>
json render_case(const std::string& name, const std::string& endpoint, const GenerationRequest& request,
                 const std::vector<std::vector<std::string>>& pieces_per_choice,
                 protocol::FinishReason reason = protocol::FinishReason::kStop) {
  std::vector<std::string> ids;
  const std::string base = name.substr(0, name.find('-'));
  for (std::size_t i = 0; i < pieces_per_choice.size(); ++i) ids.push_back("job-" + base + "-" + std::to_string(i));
  Renderer renderer(request, ids, kCreated);
  std::vector<std::string> payloads;
  for (std::size_t i = 0; i < pieces_per_choice.size(); ++i) {
    for (const protocol::Event& e : job_events(pieces_per_choice[i], reason, {9, 4}, "why")) {
      for (std::string& p : renderer.on_event(i, e)) payloads.push_back(std::move(p));
    }
  }
  json c = {{"name", name}, {"endpoint", endpoint}, {"stream", request.stream}};
  if (request.stream) {
    if (!renderer.failure()) {
      for (std::string& p : renderer.finish()) payloads.push_back(std::move(p));
    }
    c["status"] = 200;
    c["body"] = sse(payloads, renderer.failure().has_value());
  } else {
    try {
      c["body"] = renderer.response();
      c["status"] = 200;
    } catch (const ApiError& e) {
      c["body"] = api_error_body(e);
      c["status"] = e.status();
    }
  }
  return c;
}

json refused_case(const std::string& name, const ApiError& e) {
  return {{"name", name}, {"endpoint", "chat"}, {"stream", false}, {"status", e.status()}, {"body", api_error_body(e)}};
}

GenerationRequest chat(const std::string& text) { return read_chat_completion_request(body(text), test_models(), {}); }
GenerationRequest completion(const std::string& text) { return read_completion_request(body(text), test_models(), {}); }

const char* kTools = R"("tools": [{"type": "function", "function": {"name": "get_weather"}},
                                 {"type": "function", "function": {"name": "get_time"}}])";

class OpenAISdk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kSdk)) GTEST_SKIP() << "the npm package openai is not installed (scripts/setup)";
    if (flashq::testing::run_command("node --version").exit_code != 0) GTEST_SKIP() << "node is not installed";
  }

  // Runs the SDK over the cases; results by name.
  std::map<std::string, json> read_with_sdk(const json& cases) {
    const std::filesystem::path in = dir_ / "cases.json", out = dir_ / "results.json";
    std::ofstream(in) << cases.dump();
    const auto run =
        flashq::testing::run_command("node tests/gateway/openai_sdk_read.mjs " + in.string() + " " + out.string());
    EXPECT_EQ(run.exit_code, 0) << run.output;
    std::ifstream file(out);
    std::map<std::string, json> results;
    if (!file) {
      ADD_FAILURE() << "no results from the SDK: " << run.output;
      return results;
    }
    for (const json& r : json::parse(file)) results[r.at("name").get<std::string>()] = r;
    EXPECT_EQ(results.size(), cases.size());
    return results;
  }

  flashq::testing::TempDir dir_;
};

// The SDK's accumulated completion against the whole response: what a client reads of a message.
void expect_same_completion(const json& streamed, const json& whole) {
  EXPECT_EQ(streamed.at("id"), whole.at("id"));
  EXPECT_EQ(streamed.at("object"), "chat.completion");
  EXPECT_EQ(streamed.at("created"), whole.at("created"));
  EXPECT_EQ(streamed.at("model"), whole.at("model"));
  ASSERT_EQ(streamed.at("choices").size(), whole.at("choices").size());
  for (std::size_t i = 0; i < whole["choices"].size(); ++i) {
    const json& s = streamed["choices"][i];
    const json& w = whole["choices"][i];
    EXPECT_EQ(s.at("index"), w.at("index"));
    EXPECT_EQ(s.at("finish_reason"), w.at("finish_reason"));
    EXPECT_EQ(s["message"].at("role"), "assistant");
    EXPECT_EQ(s["message"].at("content"), w["message"].at("content"));
    EXPECT_EQ(s["message"].value("tool_calls", json()), w["message"].value("tool_calls", json()));
  }
}

// Reasoning as the stream's chunks carry it, concatenated (the SDK's snapshot keeps only the last
// fragment of a field it does not know).
std::string streamed_reasoning(const json& chunks, std::size_t choice) {
  std::string text;
  for (const json& chunk : chunks) {
    for (const json& c : chunk.at("choices")) {
      if (c.at("index") == choice && c["delta"].contains("reasoning"))
        text += c["delta"]["reasoning"].get<std::string>();
    }
  }
  return text;
}

TEST_F(OpenAISdk, ChatResponsesAndStreamsReadAsWritten) {
  const std::string qwen_text =
      "<think>\nWeather first, then time.\n</think>\n\nChecking.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>";
  const std::string llama_text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  json cases = json::array();
  for (bool stream : {false, true}) {
    const std::string s = stream ? "true" : "false";
    const std::string suffix = stream ? "-stream" : "-whole";
    cases.push_back(render_case<ChatCompletionRenderer>(
        "plain" + suffix, "chat",
        chat(R"({"model": "plain", "messages": [{"role": "user", "content": "hi"}], "stream": )" + s + "}"),
        {random_pieces("Hello, world! Ünïcödé too.", 1)}));
    cases.push_back(render_case<ChatCompletionRenderer>(
        "qwen3" + suffix, "chat",
        chat(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], )" + std::string(kTools) +
             R"(, "stream": )" + s + "}"),
        {random_pieces(qwen_text, 2)}));
    cases.push_back(render_case<ChatCompletionRenderer>(
        "llama" + suffix, "chat",
        chat(R"({"model": "llama", "messages": [{"role": "user", "content": "hi"}], )" + std::string(kTools) +
             R"(, "stream": )" + s + "}"),
        {random_pieces(llama_text, 3)}));
    cases.push_back(render_case<ChatCompletionRenderer>(
        "n2" + suffix, "chat",
        chat(R"({"model": "plain", "messages": [{"role": "user", "content": "hi"}], "n": 2, "stream": )" + s +
             (stream ? R"(, "stream_options": {"include_usage": true})" : "") + "}"),
        {random_pieces("first answer", 4), random_pieces("second answer", 5)}));
  }
  const std::map<std::string, json> results = read_with_sdk(cases);
  for (const json& c : cases) {
    if (c["stream"]) continue;
    const std::string name = c["name"];
    const json& whole = results.at(name);
    ASSERT_TRUE(whole.contains("response")) << whole.dump();
    EXPECT_EQ(whole["response"], json::parse(c["body"].get<std::string>())) << name;
    EXPECT_EQ(whole["fetches"], 1);
    const std::string stream_name = name.substr(0, name.size() - 6) + "-stream";
    const json& streamed = results.at(stream_name);
    ASSERT_TRUE(streamed.contains("final")) << streamed.dump();
    expect_same_completion(streamed["final"], whole["response"]);
    for (std::size_t i = 0; i < whole["response"]["choices"].size(); ++i) {
      const json& reasoning = whole["response"]["choices"][i]["message"]["reasoning"];
      EXPECT_EQ(streamed_reasoning(streamed["chunks"], i), reasoning.is_null() ? "" : reasoning.get<std::string>());
    }
  }
  EXPECT_EQ(results.at("qwen3-whole")["response"]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(results.at("qwen3-stream")["final"]["choices"][0]["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(results.at("n2-stream")["final"]["usage"],
            json::parse(R"({"prompt_tokens": 9, "completion_tokens": 8, "total_tokens": 17})"));
}

TEST_F(OpenAISdk, CompletionsReadAsWritten) {
  json cases = json::array();
  cases.push_back(render_case<CompletionRenderer>("whole", "completions",
                                                  completion(R"({"model": "llama", "prompt": "Once", "n": 2})"),
                                                  {random_pieces(" upon a time", 6), random_pieces(" there was", 7)}));
  cases.push_back(render_case<CompletionRenderer>(
      "stream", "completions",
      completion(
          R"({"model": "llama", "prompt": "Once", "n": 2, "stream": true, "stream_options": {"include_usage": true}})"),
      {random_pieces(" upon a time", 6), random_pieces(" there was", 7)}));
  const std::map<std::string, json> results = read_with_sdk(cases);
  const json& whole = results.at("whole");
  ASSERT_TRUE(whole.contains("response")) << whole.dump();
  EXPECT_EQ(whole["response"], json::parse(cases[0]["body"].get<std::string>()));
  const json& streamed = results.at("stream");
  ASSERT_TRUE(streamed.contains("chunks")) << streamed.dump();
  std::vector<std::string> texts(2);
  json usage;
  for (const json& chunk : streamed["chunks"]) {
    EXPECT_EQ(chunk["object"], "text_completion");
    for (const json& c : chunk["choices"]) texts.at(c["index"].get<std::size_t>()) += c["text"].get<std::string>();
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"];
  }
  EXPECT_EQ(texts[0], whole["response"]["choices"][0]["text"]);
  EXPECT_EQ(texts[1], whole["response"]["choices"][1]["text"]);
  EXPECT_EQ(usage, whole["response"]["usage"]);
}

TEST_F(OpenAISdk, ErrorsReachTheClientAsTheirClassAndAreRetriedOnlyWhereARetryCanSucceed) {
  json cases = json::array();
  cases.push_back(refused_case(
      "unsupported", testing::chat_error(body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}],
          "prediction": {"type": "content", "content": "x"}})"))));
  cases.push_back(
      refused_case("unknown_model",
                   testing::chat_error(body(R"({"model": "nope", "messages": [{"role": "user", "content": "x"}]})"))));
  const GenerationRequest whole = chat(R"({"model": "plain", "messages": [{"role": "user", "content": "x"}]})");
  const GenerationRequest streamed =
      chat(R"({"model": "plain", "messages": [{"role": "user", "content": "x"}], "stream": true})");
  using protocol::FinishReason;
  for (auto [name, reason] : std::vector<std::pair<std::string, FinishReason>>{{"cancelled", FinishReason::kCancelled},
                                                                               {"deadline", FinishReason::kDeadline},
                                                                               {"error", FinishReason::kError},
                                                                               {"rejected", FinishReason::kRejected}}) {
    cases.push_back(render_case<ChatCompletionRenderer>(name, "chat", whole, {{"x"}}, reason));
    cases.push_back(render_case<ChatCompletionRenderer>(name + "-stream", "chat", streamed, {{"x"}}, reason));
  }
  const std::map<std::string, json> results = read_with_sdk(cases);
  struct Expected {
    const char* name;
    const char* sdk_class;
    int status;
    const char* code;
    const char* param;
    int fetches;  // 1: not retried; 3: retried twice (maxRetries 2)
  };
  for (const Expected& e :
       std::vector<Expected>{{"unsupported", "BadRequestError", 400, "unsupported_parameter", "prediction", 1},
                             {"unknown_model", "NotFoundError", 404, "model_not_found", "model", 1},
                             {"cancelled", "APIError", 499, "cancelled", nullptr, 1},
                             {"deadline", "InternalServerError", 504, "timeout", nullptr, 3},
                             {"error", "InternalServerError", 500, "server_error", nullptr, 3},
                             {"rejected", "BadRequestError", 400, "job_rejected", nullptr, 1}}) {
    const json& r = results.at(e.name);
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_EQ(r["error"]["class"], e.sdk_class) << e.name;
    EXPECT_EQ(r["error"]["status"], e.status) << e.name;
    EXPECT_EQ(r["error"]["code"], e.code) << e.name;
    EXPECT_EQ(r["error"]["param"], e.param ? json(e.param) : json()) << e.name;
    EXPECT_EQ(r["fetches"], e.fetches) << e.name;
    if (std::string(e.name) == "unsupported" || std::string(e.name) == "unknown_model") continue;
    // Streamed, the error object ends the stream: the SDK throws it from the iteration.
    const json& s = results.at(std::string(e.name) + "-stream");
    ASSERT_TRUE(s.contains("error")) << s.dump();
    EXPECT_EQ(s["error"]["code"], e.code) << e.name;
    EXPECT_EQ(s["fetches"], 1);
  }
}

}  // namespace
}  // namespace flashq::gateway
