// POST /v1/responses bodies read into jobs: every field served, every refusal, and the request
// recovered from the job after a trip through the wire's SUBMIT message.
#include <gtest/gtest.h>

#include "gateway/openai/api_error.h"
#include "shared/protocol/json_value.h"
#include "shared/protocol/producer_messages.h"
#include "tests/gateway/responses_test_support.h"

namespace flashq::gateway {
namespace {

using namespace flashq::gateway::testing;
using protocol::ChatMessage;

std::vector<ChatMessage> messages_of(const ResponsesRequest& request) {
  return std::get<std::vector<ChatMessage>>(request.job.prompt);
}

TEST(ResponsesRequest, StringInputIsOneUserMessageWithOpenAIDefaults) {
  const ResponsesRequest r = read(R"({"model": "qwen3", "input": "Hello"})", {.priority = 3, .deadline_ms = 9000, .created_at = 1767225600});
  EXPECT_EQ(r.model, "qwen3");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.background);
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.created_at, 1767225600);
  EXPECT_EQ(messages_of(r), (std::vector<ChatMessage>{{.role = "user", .content = "Hello"}}));
  EXPECT_TRUE(r.job.id.empty());
  EXPECT_TRUE(r.job.stream);
  EXPECT_EQ(r.job.model, "qwen3");
  EXPECT_EQ(r.job.max_tokens, kDefaultMaxOutputTokens);
  EXPECT_EQ(r.job.temperature, 1.0);  // OpenAI's default, not the job's
  EXPECT_EQ(r.job.top_p, 1.0);
  EXPECT_EQ(r.job.priority, 3);
  EXPECT_EQ(r.job.deadline_ms, 9000);
  EXPECT_FALSE(r.job.tools);
  EXPECT_FALSE(r.job.chat_template_kwargs);
  ASSERT_TRUE(r.job.metadata);
  EXPECT_EQ(r.settings.tool_choice.mode, ToolChoiceMode::kAuto);
  EXPECT_FALSE(r.settings.parse_tool_calls);
  EXPECT_EQ(r.settings.echo.at("tool_choice"), "auto");
  EXPECT_EQ(r.settings.echo.at("tools"), ResponsesJson::array());
  EXPECT_EQ(r.settings.echo.at("truncation"), "disabled");
  // A body parsed as nlohmann::json (keys sorted) is read as well; ordered_json keeps the client's order.
  EXPECT_EQ(read_responses_request(nlohmann::json::parse(R"({"model": "qwen3", "input": "Hello"})"), test_models()).job.prompt,
            r.job.prompt);
  // Half of a small context when that is below the default budget.
  EXPECT_EQ(read(R"({"model": "plain", "input": "x"})").job.max_tokens, 1024);
}

TEST(ResponsesRequest, ItemsBecomeOneConversation) {
  const ResponsesRequest r = read(R"({"model": "qwen3", "instructions": "Be brief.", "input": [
    {"role": "developer", "content": "Use tools."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in"},
                                                   {"type": "input_text", "text": "Paris and Rome?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Two calls."}]},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
    {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}", "id": "fc_1", "status": "completed"},
    {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\": \"Rome\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "18C"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "21C"}]},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Summarised."}]},
    {"role": "assistant", "content": "Paris 18C, Rome 21C."},
    {"role": "user", "content": "Thanks"}
  ]})");
  ChatMessage turn{.role = "assistant", .content = "Checking."};
  turn.reasoning_content = "Two calls.";
  turn.tool_calls = {{"c1", "get_weather", R"("{\"city\": \"Paris\"}")"}, {"c2", "get_weather", R"("{\"city\": \"Rome\"}")"}};
  ChatMessage result1{.role = "tool", .content = "18C"};
  result1.tool_call_id = "c1";
  result1.name = "get_weather";
  ChatMessage result2{.role = "tool", .content = "21C"};
  result2.tool_call_id = "c2";
  result2.name = "get_weather";
  ChatMessage answer{.role = "assistant", .content = "Paris 18C, Rome 21C."};
  answer.reasoning_content = "Summarised.";
  const std::vector<ChatMessage> expected = {{.role = "system", .content = "Be brief."},
                                             {.role = "system", .content = "Use tools."},
                                             {.role = "user", .content = "Weather in\nParis and Rome?"},
                                             turn,
                                             result1,
                                             result2,
                                             answer,
                                             {.role = "user", .content = "Thanks"}};
  EXPECT_EQ(messages_of(r), expected);
  EXPECT_EQ(r.settings.echo.at("instructions"), "Be brief.");
}

TEST(ResponsesRequest, CallsWithoutTextHaveNoContentAndReasoningAloneHasEmptyContent) {
  const ResponsesRequest r = read(R"({"model": "qwen3", "input": [
    {"role": "user", "content": "q"},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "unknown", "output": "r"},
    {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hm"}]}]})");
  const std::vector<ChatMessage> m = messages_of(r);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_FALSE(m[1].content);
  EXPECT_EQ(m[1].tool_calls.size(), 1u);
  EXPECT_FALSE(m[2].name);  // the call it answers is not in the input
  EXPECT_EQ(m[3].content, "");
  EXPECT_EQ(m[3].reasoning_content, "hm");
}

TEST(ResponsesRequest, FunctionToolsKeepTheirKeyOrderForTheTemplateAndTheEcho) {
  const ResponsesRequest r = read(R"({"model": "qwen3", "input": "x", "tool_choice": {"type": "function", "name": "b_tool"},
    "parallel_tool_calls": false, "tools": [
    {"type": "function", "name": "b_tool", "description": "B.", "parameters": {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}, "strict": false},
    {"type": "function", "name": "a_tool", "parameters": null}]})");
  ASSERT_TRUE(r.job.tools);
  EXPECT_EQ(*r.job.tools,
            R"([{"type":"function","function":{"name":"b_tool","description":"B.","parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}}},)"
            R"({"type":"function","function":{"name":"a_tool"}}])");
  EXPECT_EQ(r.settings.echo.at("tools").dump(),
            R"([{"type":"function","name":"b_tool","description":"B.","parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}},"strict":false},)"
            R"({"type":"function","name":"a_tool","description":null,"parameters":null,"strict":true}])");
  EXPECT_EQ(r.settings.tool_choice, (ToolChoice{ToolChoiceMode::kNamed, "b_tool"}));
  EXPECT_TRUE(r.settings.parse_tool_calls);
  EXPECT_EQ(r.settings.echo.at("parallel_tool_calls"), false);
  EXPECT_EQ(read(R"({"model": "qwen3", "input": "x", "tool_choice": "none", "tools": [{"type": "function", "name": "f"}]})")
                .settings.parse_tool_calls,
            false);
  EXPECT_EQ(read(R"({"model": "llama3", "input": "x", "tool_choice": "required", "tools": [{"type": "function", "name": "f"}]})")
                .settings.tool_choice.mode,
            ToolChoiceMode::kRequired);
}

TEST(ResponsesRequest, SamplingMetadataReasoningAndFlags) {
  const ResponsesRequest r = read(R"({"model": "qwen3-thinking", "input": "x", "max_output_tokens": 300, "temperature": 0.5,
    "top_p": 0.9, "metadata": {"run": "7"}, "store": false, "background": true, "stream": true,
    "stream_options": {"include_obfuscation": false}, "include": ["reasoning.encrypted_content"],
    "truncation": "disabled", "reasoning": {"effort": "none", "summary": "auto"}, "text": {"format": {"type": "text"}, "verbosity": "medium"},
    "user": "u1", "safety_identifier": "s1", "prompt_cache_key": "k", "service_tier": "auto", "top_logprobs": 0,
    "previous_response_id": null, "chat_template_kwargs": {"custom": 1}})");
  EXPECT_EQ(r.job.max_tokens, 300);
  EXPECT_EQ(r.job.temperature, 0.5);
  EXPECT_EQ(r.job.top_p, 0.9);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.background);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.job.chat_template_kwargs, R"({"custom":1,"reasoning_effort":"none","enable_thinking":false})");
  EXPECT_FALSE(r.settings.starts_in_reasoning);  // thinking turned off
  const ResponsesJson& echo = r.settings.echo;
  EXPECT_EQ(echo.at("max_output_tokens"), 300);
  EXPECT_EQ(echo.at("metadata"), parse_body(R"({"run": "7"})"));
  EXPECT_EQ(echo.at("reasoning"), parse_body(R"({"effort": "none", "summary": "auto"})"));
  EXPECT_EQ(echo.at("user"), "u1");
  EXPECT_EQ(r.job.session, "u1") << "`user` names the job's session";
  EXPECT_EQ(echo.at("safety_identifier"), "s1");
  EXPECT_EQ(echo.at("store"), false);
  EXPECT_EQ(echo.at("background"), true);
  // The client's own template variables win over the ones reasoning implies.
  const ResponsesRequest own = read(R"({"model": "qwen3-thinking", "input": "x", "reasoning": {"effort": "high"},
    "chat_template_kwargs": {"enable_thinking": true, "reasoning_effort": "low"}})");
  EXPECT_EQ(own.job.chat_template_kwargs, R"({"enable_thinking":true,"reasoning_effort":"low"})");
  EXPECT_TRUE(own.settings.starts_in_reasoning);
}

TEST(ResponsesRequest, LogprobsAreAskedByIncludeOrTopLogprobsAndEchoed) {
  const ResponsesRequest included =
      read(R"({"model": "qwen3", "input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 4})");
  EXPECT_EQ(included.job.logprobs, 4);
  EXPECT_EQ(included.settings.echo.at("top_logprobs"), 4);
  EXPECT_EQ(read(R"({"model": "qwen3", "input": "x", "include": ["message.output_text.logprobs"]})").job.logprobs, 0);
  EXPECT_EQ(read(R"({"model": "qwen3", "input": "x", "top_logprobs": 2})").job.logprobs, 2);
  const ResponsesRequest none = read(R"({"model": "qwen3", "input": "x", "top_logprobs": 0})");
  EXPECT_EQ(none.job.logprobs, std::nullopt);
  EXPECT_FALSE(none.settings.echo.contains("top_logprobs"));
}

struct Refusal {
  const char* body;
  int status;
  const char* code;
  const char* param;
};

TEST(ResponsesRequest, EveryRefusalNamesItsField) {
  const Refusal refusals[] = {
      {R"([1])", 400, "invalid_type", nullptr},
      {R"({"input": "x"})", 400, "missing_required_parameter", "model"},
      {R"({"model": "gpt-9", "input": "x"})", 404, "model_not_found", "model"},
      {R"({"model": "qwen3"})", 400, "missing_required_parameter", "input"},
      {R"({"model": "qwen3", "input": "x", "frequency_penalty": 1})", 400, "unknown_parameter", "frequency_penalty"},
      {R"({"model": "qwen3", "input": 5})", 400, "invalid_type", "input"},
      {R"({"model": "qwen3", "input": []})", 400, "empty_array", "input"},
      {R"({"model": "qwen3", "input": [{"role": "tool", "content": "x"}]})", 400, "invalid_value", "input[0].role"},
      {R"({"model": "qwen3", "input": [{"role": "user"}]})", 400, "missing_required_parameter", "input[0].content"},
      {R"({"model": "qwen3", "input": [{"role": "user", "content": "x", "name": "n"}]})", 400, "unknown_parameter", "input[0].name"},
      {R"({"model": "qwen3", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", 400,
       "unsupported_parameter", "input[0].content[0].type"},
      {R"({"model": "qwen3", "input": [{"role": "user", "content": [{"type": "refusal", "refusal": "no"}]}]})", 400,
       "invalid_value", "input[0].content[0].type"},
      {R"({"model": "qwen3", "input": [{"role": "user", "content": [{"type": "input_text"}]}]})", 400,
       "missing_required_parameter", "input[0].content[0].text"},
      {R"({"model": "qwen3", "input": [{"type": "item_reference", "id": "msg_1"}]})", 400, "unsupported_parameter", "input[0].type"},
      {R"({"model": "qwen3", "input": [{"type": "web_search_call", "id": "w"}]})", 400, "unsupported_parameter", "input[0].type"},
      {R"({"model": "qwen3", "input": [{"type": "function_call", "call_id": "c", "name": "f"}]})", 400,
       "missing_required_parameter", "input[0].arguments"},
      {R"({"model": "qwen3", "input": [{"type": "function_call_output", "call_id": "c"}]})", 400,
       "missing_required_parameter", "input[0].output"},
      {R"({"model": "qwen3", "input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]})", 400,
       "unsupported_parameter", "input[0].encrypted_content"},
      {R"({"model": "qwen3", "input": [{"type": "reasoning", "summary": [{"type": "reasoning_text", "text": "x"}]}]})", 400,
       "invalid_value", "input[0].summary[0].type"},
      {R"({"model": "qwen3", "input": "x", "instructions": 3})", 400, "invalid_type", "instructions"},
      {R"({"model": "qwen3", "input": "x", "tools": [{"type": "web_search"}]})", 400, "unsupported_parameter", "tools[0].type"},
      {R"({"model": "qwen3", "input": "x", "tools": [{"type": "function"}]})", 400, "missing_required_parameter", "tools[0].name"},
      {R"({"model": "qwen3", "input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]})", 400,
       "invalid_value", "tools[1].name"},
      {R"({"model": "qwen3", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": []}]})", 400, "invalid_type",
       "tools[0].parameters"},
      {R"({"model": "plain", "input": "x", "tools": [{"type": "function", "name": "f"}]})", 400, "unsupported_parameter", "tools"},
      {R"({"model": "qwen3", "input": "x", "tool_choice": "required"})", 400, "invalid_value", "tool_choice"},
      {R"({"model": "qwen3", "input": "x", "tool_choice": "always", "tools": [{"type": "function", "name": "f"}]})", 400,
       "invalid_value", "tool_choice"},
      {R"({"model": "qwen3", "input": "x", "tool_choice": {"type": "function", "name": "g"}, "tools": [{"type": "function", "name": "f"}]})",
       400, "invalid_value", "tool_choice.name"},
      {R"({"model": "qwen3", "input": "x", "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}})", 400,
       "unsupported_parameter", "tool_choice"},
      {R"({"model": "qwen3", "input": "x", "max_output_tokens": 0})", 400, "invalid_value", "max_output_tokens"},
      {R"({"model": "plain", "input": "x", "max_output_tokens": 2048})", 400, "invalid_value", "max_output_tokens"},
      {R"({"model": "qwen3", "input": "x", "max_output_tokens": 1.5})", 400, "invalid_type", "max_output_tokens"},
      {R"({"model": "qwen3", "input": "x", "temperature": 2.5})", 400, "invalid_value", "temperature"},
      {R"({"model": "qwen3", "input": "x", "top_p": 0})", 400, "invalid_value", "top_p"},
      {R"({"model": "qwen3", "input": "x", "stream": "yes"})", 400, "invalid_type", "stream"},
      {R"({"model": "qwen3", "input": "x", "stream_options": {}})", 400, "invalid_value", "stream_options"},
      {R"({"model": "qwen3", "input": "x", "metadata": {"k": 1}})", 400, "invalid_type", "metadata.k"},
      {R"({"model": "qwen3", "input": "x", "previous_response_id": "resp_1"})", 400, "unsupported_parameter", "previous_response_id"},
      {R"({"model": "qwen3", "input": "x", "conversation": "conv_1"})", 400, "unsupported_parameter", "conversation"},
      {R"({"model": "qwen3", "input": "x", "prompt": {"id": "p"}})", 400, "unsupported_parameter", "prompt"},
      {R"({"model": "qwen3", "input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"not": {}}}}})", 400,
       "invalid_value", "text.format"},
      {R"({"model": "qwen3", "input": "x", "text": {"format": {"type": "yaml"}}})", 400, "invalid_value", "text.format"},
      {R"({"model": "qwen3", "input": "x", "text": {"verbosity": "low"}})", 400, "unsupported_parameter", "text.verbosity"},
      {R"({"model": "qwen3", "input": "x", "reasoning": {"effort": "extreme"}})", 400, "invalid_value", "reasoning.effort"},
      {R"({"model": "qwen3", "input": "x", "reasoning": {"summary": "detailed"}})", 400, "unsupported_parameter", "reasoning.summary"},
      {R"({"model": "qwen3", "input": "x", "truncation": "auto"})", 400, "unsupported_parameter", "truncation"},
      {R"({"model": "qwen3", "input": "x", "include": ["file_search_call.results"]})", 400, "unsupported_parameter", "include"},
      {R"({"model": "qwen3", "input": "x", "top_logprobs": 21})", 400, "invalid_value", "top_logprobs"},
      {R"({"model": "qwen3", "input": "x", "service_tier": "flex"})", 400, "unsupported_parameter", "service_tier"},
      {R"({"model": "qwen3", "input": "x", "max_tool_calls": 2})", 400, "unsupported_parameter", "max_tool_calls"},
      {R"({"model": "qwen3", "input": "x", "chat_template_kwargs": {"messages": []}})", 400, "invalid_value", "chat_template_kwargs"},
  };
  // What the job map refuses is refused here too, not by the broker after the answer began (a
  // strict tool's name is held to OpenAI's 64 characters before: strict_tools_request_test.cpp).
  const std::string long_name = R"({"model": "qwen3", "input": "x", "tools": [{"type": "function", "name": ")" +
                                std::string(300, 'f') + R"(", "parameters": {"type": "object"}, "strict": false}]})";
  try {
    read(long_name);
    ADD_FAILURE() << "a tool name of 300 bytes was accepted";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400) << error.what();
    EXPECT_NE(std::string(error.what()).find("job limits"), std::string::npos) << error.what();
  }
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.body);
    try {
      read(refusal.body);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), refusal.status) << error.what();
      EXPECT_EQ(error.code(), refusal.code) << error.what();
      EXPECT_EQ(error.param(), refusal.param ? std::optional<std::string>(refusal.param) : std::nullopt) << error.what();
      EXPECT_EQ(error.type(), "invalid_request_error");
    }
  }
}

// The job as the broker and Redis give it back: through SUBMIT's encoding and decoding.
protocol::Job over_the_wire(protocol::Job job) {
  return protocol::decode_body<protocol::Submit>(protocol::encode_body(protocol::Submit{std::move(job)})).job;
}

TEST(ResponsesRequest, IsRecoveredFromItsJobAlone) {
  for (const char* body : {
           R"({"model": "qwen3", "input": "Hello"})",
           R"({"model": "qwen3-thinking", "input": [{"role": "user", "content": "q"}], "instructions": "I", "stream": true,
               "background": true, "store": false, "metadata": {"a": "b"}, "reasoning": {"effort": "low"},
               "tool_choice": {"type": "function", "name": "f"}, "max_output_tokens": 99, "user": "u",
               "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"y": {}, "x": {}}}}]})",
           R"({"model": "llama3", "input": "x", "tool_choice": "none", "tools": [{"type": "function", "name": "f"}]})",
       }) {
    SCOPED_TRACE(body);
    ResponsesRequest original = read(body, {.priority = -2, .deadline_ms = 500, .created_at = 1767225601});
    original.job.id = "resp_00ff";
    const ResponsesRequest recovered = recover_responses_request(over_the_wire(original.job));
    EXPECT_EQ(recovered, original);
    EXPECT_EQ(recovered.created_at, 1767225601);
    EXPECT_EQ(recovered.settings.echo.dump(), original.settings.echo.dump());  // key order too
  }
}

TEST(ResponsesRequest, RecoveryNeedsNotTheModelToBeServedStill) {
  ResponsesRequest original = read(R"({"model": "qwen3-thinking", "input": "x", "tools": [{"type": "function", "name": "f"}]})");
  original.job.id = "resp_1";
  const ResponsesRequest recovered = recover_responses_request(original.job);
  EXPECT_EQ(recovered.settings.output_format, (OutputFormat{ToolCallFormat::kHermes, ReasoningFormat::kThinkTags}));
  EXPECT_TRUE(recovered.settings.starts_in_reasoning);
}

// A job known only by its id and metadata, as a broker's STATUS_REPLY gives it, is recovered
// with the model its metadata names.
TEST(ResponsesRequest, AJobKnownByIdAndMetadataIsRecovered) {
  protocol::Job made = read(R"({"model": "qwen3", "input": "x"})").job;
  made.id = "resp_1";
  protocol::Job known;
  known.id = made.id;
  known.metadata = made.metadata;
  const ResponsesRequest recovered = recover_responses_request(known);
  EXPECT_EQ(recovered.model, "qwen3");
  EXPECT_EQ(recovered.settings, recover_responses_request(made).settings);
}

TEST(ResponsesRequest, AJobNotMadeByTheResponsesApiIsNotAResponse) {
  protocol::Job plain;
  plain.id = "job-1";
  plain.model = "qwen3";
  plain.prompt = std::string("hi");
  protocol::Job foreign = plain;
  foreign.metadata = protocol::pack_json_text(R"({"owner": "batch"})", "metadata");
  for (const protocol::Job& job : {plain, foreign}) {
    try {
      recover_responses_request(job);
      ADD_FAILURE() << "recovered";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 404);
      EXPECT_EQ(error.code(), "response_not_found");
    }
  }
}

}  // namespace
}  // namespace flashq::gateway
