// The chat fields of docs/protocol.md "The job map": OpenAI-shaped messages (tool calls, tool
// results, reasoning), `tools`, `chat_template_kwargs` and `add_generation_prompt`. They survive
// a round trip, keep their key order, and every rule's refusal is kProtocol naming the field.
#include <gtest/gtest.h>

#include "shared/protocol/limits.h"
#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::expect_protocol_error;
using testing::json;
using testing::msgpack_of;

const json kWeatherTool = json::parse(R"({"type": "function", "function": {"name": "get_weather",
  "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
  "required": ["city"]}}})");

// A conversation with every kind of message: system, user, an assistant turn that thinks and
// calls a tool, the tool's result, and the assistant's answer.
Job tool_job() {
  Job job;
  job.id = "chat-1";
  ChatMessage call{.role = "assistant", .content = std::nullopt};
  call.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"},
                     {"", "get_weather", R"("{\"city\": \"Oslo\"}")"}};
  call.reasoning_content = "The user wants the weather.";
  ChatMessage result{.role = "tool", .content = "18 C"};
  result.tool_call_id = "call_1";
  result.name = "get_weather";
  job.prompt = std::vector<ChatMessage>{{"system", "Be brief."}, {"user", "Weather in Paris?"}, call, result};
  job.tools = json::array({kWeatherTool}).dump();
  job.chat_template_kwargs =
      R"({"enable_thinking":false,"date_string":"26 Jul 2024","nested":{"z":1,"a":[true,null,2.5]}})";
  job.add_generation_prompt = false;
  return job;
}

json chat_job(json extra = json::object()) {
  json job = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [key, value] : extra.items()) job[key] = value;
  return job;
}

void expect_submit_error(const json& job, const std::string& field, const std::string& problem = "") {
  expect_protocol_error(
      [&] {
        decode_body<Submit>(msgpack_of({{"job", job}}));
      },
      {"SUBMIT field job." + field, problem});
}

Job decode_job(const json& job) { return decode_body<Submit>(msgpack_of({{"job", job}})).job; }

TEST(ChatRoundTrip, ToolCallsToolResultsReasoningAndOptionsSurvive) {
  const Job job = tool_job();
  EXPECT_EQ(decode_body<Submit>(encode_body(Submit{job})).job, job);
  Assign assign{.job = job, .attempt = 2, .resume_tokens = {5, 6}};
  EXPECT_EQ(decode_body<Assign>(encode_body(assign)).job, job);
}

TEST(ChatRoundTrip, TheWireHoldsOpenAiShapedMaps) {
  const json body = json::from_msgpack(encode_body(Submit{tool_job()}));
  const json& message = body["job"]["messages"][2];
  EXPECT_FALSE(message.contains("content"));
  EXPECT_EQ(message["tool_calls"][0],
            json::parse(
                R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}})"));
  EXPECT_EQ(message["tool_calls"][1]["function"]["arguments"], R"({"city": "Oslo"})");
  EXPECT_EQ(body["job"]["messages"][3]["tool_call_id"], "call_1");
  EXPECT_EQ(body["job"]["tools"], json::array({kWeatherTool}));
  EXPECT_EQ(body["job"]["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(body["job"]["add_generation_prompt"], false);
}

TEST(ChatRoundTrip, KeyOrderOfToolsAndOptionsIsKept) {
  // Templates render tool definitions key by key (tojson), so the producer's order must survive.
  using ordered = nlohmann::ordered_json;
  ordered job = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                 {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"description", "d"}}}}}},
                 {"chat_template_kwargs", {{"zeta", 1}, {"alpha", 2}}}};
  const std::vector<std::uint8_t> bytes = ordered::to_msgpack(ordered{{"job", job}});
  const Job decoded = decode_body<Submit>(std::string(bytes.begin(), bytes.end())).job;
  EXPECT_EQ(decoded.tools, R"([{"type":"function","function":{"name":"f","description":"d"}}])");
  EXPECT_EQ(decoded.chat_template_kwargs, R"({"zeta":1,"alpha":2})");
  const std::vector<std::uint8_t> again =
      ordered::to_msgpack(ordered::from_msgpack(encode_body(Submit{decoded}))["job"]);
  EXPECT_EQ(ordered::from_msgpack(again)["tools"], job["tools"]);
  EXPECT_EQ(ordered::from_msgpack(again)["chat_template_kwargs"].dump(), job["chat_template_kwargs"].dump());
}

TEST(ChatDefaults, PlainMessagesStayValidAndTakeTheDefaults) {
  const Job job = decode_job(chat_job());
  EXPECT_EQ(job.prompt, Prompt(std::vector<ChatMessage>{{"user", "hi"}}));
  EXPECT_FALSE(job.tools.has_value());
  EXPECT_FALSE(job.chat_template_kwargs.has_value());
  EXPECT_TRUE(job.add_generation_prompt);
  json nil = chat_job({{"tools", nullptr}, {"chat_template_kwargs", nullptr}, {"add_generation_prompt", nullptr}});
  EXPECT_EQ(decode_job(nil), job);
}

TEST(ChatMessages, ContentMayBeAbsentOnlyBesideToolCalls) {
  const json call = {{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}};
  const Job job = decode_job({{"messages", {{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}}}}});
  EXPECT_FALSE(std::get<std::vector<ChatMessage>>(job.prompt)[0].content.has_value());
  expect_submit_error({{"messages", {{{"role", "assistant"}, {"tool_calls", json::array()}}}}}, "messages[0].content",
                      "missing");
  expect_submit_error({{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}}}}},
                      "messages[0].content", "must be a string");
}

TEST(ChatMessages, ToolCallsAreCheckedFieldByField) {
  auto with_call = [](json call) { return json{{"messages", {{{"role", "assistant"}, {"tool_calls", {call}}}}}}; };
  const std::string at = "messages[0].tool_calls[0]";
  expect_submit_error(with_call("get_weather"), at, "must be a map");
  expect_submit_error(with_call({{"type", "function"}}), at + ".function", "missing");
  expect_submit_error(with_call({{"type", "retrieval"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}),
                      at + ".type", "function");
  expect_submit_error(with_call({{"function", {{"arguments", "{}"}}}}), at + ".function.name", "missing");
  expect_submit_error(with_call({{"function", {{"name", std::string(257, 'f')}, {"arguments", "{}"}}}}),
                      at + ".function.name", "257 bytes");
  expect_submit_error(with_call({{"function", {{"name", "f"}}}}), at + ".function.arguments", "missing");
  expect_submit_error(with_call({{"id", std::string(257, 'i')}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}),
                      at + ".id", "257 bytes");
  const json call = {{"function", {{"name", "f"}, {"arguments", "{}"}}}};
  expect_submit_error(
      {{"messages", {{{"role", "assistant"}, {"tool_calls", std::vector<json>(kMaxToolCalls + 1, call)}}}}},
      "messages[0].tool_calls", "at most 128");
}

TEST(ChatMessages, ToolCallIdNameAndReasoningAreStrings) {
  const json base = {{"role", "tool"}, {"content", "x"}};
  auto with = [&](const char* key, json value) {
    json m = base;
    m[key] = std::move(value);
    return json{{"messages", {m}}};
  };
  expect_submit_error(with("tool_call_id", 7), "messages[0].tool_call_id", "must be a string");
  expect_submit_error(with("tool_call_id", ""), "messages[0].tool_call_id", "0 bytes");
  expect_submit_error(with("name", std::string(257, 'n')), "messages[0].name", "257 bytes");
  expect_submit_error(with("reasoning_content", false), "messages[0].reasoning_content", "must be a string");
}

TEST(ChatMessages, ReasoningAndArgumentsCountAgainstTheChatTextLimit) {
  const std::string half(kMaxPromptBytes / 2, 'a');
  json thinking = {{"role", "assistant"}, {"content", half}, {"reasoning_content", half}};
  EXPECT_NO_THROW(decode_job({{"messages", {thinking}}}));
  const json call = {{"function", {{"name", "f"}, {"arguments", "x"}}}};
  thinking["tool_calls"] = json::array({call});
  expect_submit_error({{"messages", {thinking}}}, "messages", "content of all messages");
}

TEST(ChatOptions, OnlyAJobWithMessagesMayCarryThem) {
  for (const char* key : {"tools", "chat_template_kwargs", "add_generation_prompt"}) {
    json job = {{"prompt", "hi"}};
    job[key] = std::string(key) == "add_generation_prompt" ? json(false) : json::object();
    expect_submit_error(job, key, "only a job with messages");
  }
  Job job{.prompt = std::string("hi")};
  job.tools = "[]";
  expect_protocol_error([&] { encode_body(Submit{job}); }, {"tools"});
}

TEST(ChatOptions, ToolsAreAnArrayOfTypedDefinitionsWithinLimits) {
  expect_submit_error(chat_job({{"tools", kWeatherTool}}), "tools", "must be an array");
  expect_submit_error(chat_job({{"tools", {"get_weather"}}}), "tools[0]", "must be a map");
  expect_submit_error(chat_job({{"tools", {{{"function", {{"name", "f"}}}}}}}), "tools[0].type", "missing");
  expect_submit_error(chat_job({{"tools", {{{"type", "function"}, {"function", {{"description", "d"}}}}}}}),
                      "tools[0].function.name", "missing");
  expect_submit_error(chat_job({{"tools", std::vector<json>(kMaxTools + 1, kWeatherTool)}}), "tools", "at most 512");
  json big = kWeatherTool;
  big["function"]["description"] = std::string(kMaxToolsBytes, 'd');
  expect_submit_error(chat_job({{"tools", {big}}}), "tools", "over the limit");
  // Another kind of tool passes through for the template to judge.
  EXPECT_NO_THROW(decode_job(chat_job({{"tools", {{{"type", "code_interpreter"}}}}})));
}

// The limit holds for what this side would send again: invalid UTF-8 becomes U+FFFD (3 bytes)
// in JSON text, so a job that decodes always encodes to a job that decodes.
TEST(ChatOptions, ToolsLimitHoldsOnceStringsAreUtf8) {
  json tool = kWeatherTool;
  tool["function"]["description"] = std::string(kMaxToolsBytes / 2, '\xff');
  std::vector<std::uint8_t> bytes = json::to_msgpack(json{{"job", chat_job({{"tools", {tool}}})}});
  expect_protocol_error([&] { decode_body<Submit>(std::string(bytes.begin(), bytes.end())); },
                        {"job.tools", "once its strings are UTF-8"});
  tool["function"]["description"] = std::string(1000, '\xff');
  bytes = json::to_msgpack(json{{"job", chat_job({{"tools", {tool}}})}});
  const Job job = decode_body<Submit>(std::string(bytes.begin(), bytes.end())).job;
  EXPECT_EQ(decode_body<Submit>(encode_body(Submit{job})).job, job);
}

// Two keys that differ only in invalid UTF-8 are one key once it is U+FFFD: refused as a
// duplicate, or the job would encode to a different job.
TEST(ChatOptions, KeysThatBecomeEqualAsUtf8AreDuplicates) {
  json tool = kWeatherTool;
  tool["function"]["a\xef"] = 1;
  tool["function"]["a\x91"] = 2;
  std::vector<std::uint8_t> bytes = json::to_msgpack(json{{"job", chat_job({{"tools", {tool}}})}});
  expect_protocol_error([&] { decode_body<Submit>(std::string(bytes.begin(), bytes.end())); },
                        {"job.tools", "duplicate key"});
}

TEST(ChatOptions, TemplateOptionsAreAMapOfNamedJsonValues) {
  expect_submit_error(chat_job({{"chat_template_kwargs", {1, 2}}}), "chat_template_kwargs", "must be a map");
  expect_submit_error(chat_job({{"chat_template_kwargs", {{"", 1}}}}), "chat_template_kwargs[0]", "0 bytes");
  json many = json::object();
  for (std::size_t i = 0; i <= kMaxTemplateOptions; ++i) many["k" + std::to_string(i)] = i;
  expect_submit_error(chat_job({{"chat_template_kwargs", many}}), "chat_template_kwargs", "at most 64");
  expect_submit_error(chat_job({{"chat_template_kwargs", {{"big", std::string(kMaxTemplateOptionsBytes, 'x')}}}}),
                      "chat_template_kwargs", "over the limit");
  for (const char* reserved : {"messages", "tools", "add_generation_prompt"}) {
    expect_submit_error(chat_job({{"chat_template_kwargs", {{reserved, 1}}}}), "chat_template_kwargs", reserved);
  }
}

TEST(ChatOptions, JsonLikeValuesRefuseWhatJsonCannotSay) {
  // {"chat_template_kwargs": {"b": <bin 1>}} inside a chat job, written by hand: JSON has no binary.
  json job = chat_job();
  auto with_option = [&](const std::string& packed_value) {
    // The job map with one more key: the header grows by one and the option map goes last.
    const json inner = job;
    std::string job_bytes = msgpack_of(inner);
    std::string options = std::string(
                              "\x81\xa1"
                              "b",
                              3) +
                          packed_value;
    std::string job_map = std::string(1, static_cast<char>(0x80 | (inner.size() + 1))) + job_bytes.substr(1) +
                          std::string(
                              "\xb4"
                              "chat_template_kwargs",
                              21) +
                          options;
    return std::string(
               "\x81\xa3"
               "job",
               5) +
           job_map;
  };
  expect_protocol_error([&] { decode_body<Submit>(with_option(std::string("\xc4\x01\x00", 3))); },
                        {"job.chat_template_kwargs.b", "binary"});
  expect_protocol_error([&] { decode_body<Submit>(with_option(std::string("\xd4\x01\x00", 3))); },
                        {"job.chat_template_kwargs.b", "extension"});
  expect_protocol_error([&] { decode_body<Submit>(with_option(std::string("\xcb\x7f\xf8\0\0\0\0\0\0", 9))); },
                        {"job.chat_template_kwargs.b", "finite"});
  expect_protocol_error([&] { decode_body<Submit>(with_option(std::string("\x81\x01\x02", 3))); },
                        {"job.chat_template_kwargs.b", "keys must be strings"});
}

TEST(ChatOptions, ToolCallArgumentsMayBeAStringOrAValue) {
  auto arguments_of = [](json arguments) {
    const json call = {{"function", {{"name", "f"}, {"arguments", arguments}}}};
    const Job job = decode_job({{"messages", {{{"role", "assistant"}, {"tool_calls", {call}}}}}});
    return std::get<std::vector<ChatMessage>>(job.prompt)[0].tool_calls[0].arguments_json;
  };
  EXPECT_EQ(arguments_of(R"({"a": 1})"), R"("{\"a\": 1}")");
  EXPECT_EQ(arguments_of({{"b", 2}, {"a", {1, 2}}}), R"({"a":[1,2],"b":2})");
}

}  // namespace
}  // namespace flashq::protocol
