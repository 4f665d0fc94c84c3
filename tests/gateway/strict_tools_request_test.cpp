// Strict function tools read into the job's structured_output (strict_tools.h), on chat
// completions and the Responses API: the tool_calls grammar's request in the served model's
// format, the tools the choice allows, where the output starts relative to the reasoning, the
// answer format kept for "auto" only, and the 400s for what the grammar engine cannot take.
#include "gateway/openai/strict_tools.h"

#include <gtest/gtest.h>

#include "gateway/openai/responses_request.h"
#include "tests/gateway/openai_test_support.h"

namespace flashq::gateway::testing {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kWeatherTool = R"({"type": "function", "function": {"name": "get_weather", "strict": true,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    "additionalProperties": false}}})";
constexpr const char* kTimeTool = R"({"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}})";

json chat_body(const std::string& model, const std::string& tool_choice, const std::string& extra = "") {
  return body(R"({"model": ")" + model + R"(", "messages": [{"role": "user", "content": "x"}], "tools": [)" +
              kWeatherTool + ", " + kTimeTool + R"(], "tool_choice": )" + tool_choice + extra + "}");
}

// The job's structured output as JSON (null when the job has none).
json output_of(const json& request_body) {
  const GenerationRequest r = read_chat_completion_request(request_body, test_models(), {});
  const std::optional<std::string>& output = r.jobs.at(0).structured_output;
  return output ? json::parse(*output) : json();
}

TEST(StrictToolsRequest, RequiredChoiceConstrainsEveryToolInTheModelsFormat) {
  const json output = output_of(chat_body("qwen3", R"("required")"));
  EXPECT_EQ(output.at("type"), "tool_calls");
  EXPECT_EQ(output.at("format"), "hermes");
  EXPECT_EQ(output.at("choice"), "required");
  EXPECT_EQ(output.at("reasoning"), "optional") << "Qwen3 may think before its call";
  ASSERT_EQ(output.at("tools").size(), 2u);
  EXPECT_EQ(output.at("tools")[0].at("strict"), true);
  EXPECT_EQ(output.at("tools")[0].at("parameters").at("required"), json::array({"city"}));
  EXPECT_EQ(output.at("tools")[1].at("strict"), false) << "a non-strict tool's arguments: any object";
  EXPECT_EQ(output_of(chat_body("llama", R"("required")")).at("format"), "llama3_json");
  EXPECT_EQ(output_of(chat_body("gpt-oss", R"("required")")).at("format"), "harmony");
}

TEST(StrictToolsRequest, NamedChoiceConstrainsOnlyThatToolWhenItIsStrict) {
  const json output = output_of(chat_body("qwen3", R"({"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(output.at("choice"), "named");
  ASSERT_EQ(output.at("tools").size(), 1u);
  EXPECT_EQ(output.at("tools")[0].at("name"), "get_weather");
  EXPECT_TRUE(output_of(chat_body("qwen3", R"({"type": "function", "function": {"name": "get_time"}})")).is_null())
      << "a named tool that is not strict is not constrained";
  EXPECT_TRUE(output_of(chat_body("qwen3", R"("none")")).is_null());
}

TEST(StrictToolsRequest, ReasoningStartFollowsTheTemplateAndTheRequest) {
  EXPECT_EQ(output_of(chat_body("qwen3-thinking", R"("required")")).at("reasoning"), "inside");
  EXPECT_EQ(output_of(chat_body("qwen3", R"("required")", R"(, "chat_template_kwargs": {"enable_thinking": false})"))
                .at("reasoning"),
            "none");
  EXPECT_EQ(output_of(chat_body("gpt-oss", R"("required")", R"(, "chat_template_kwargs": {"enable_thinking": false})"))
                .at("reasoning"),
            "none")
      << "harmony's analysis is left out when the request asks for no thinking";
  EXPECT_EQ(output_of(chat_body("llama", R"("required")")).at("reasoning"), "none");
}

TEST(StrictToolsRequest, AutoKeepsTheAnswerFormatARequiredCallDropsIt) {
  const std::string format =
      R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}})";
  const json lazy = output_of(chat_body("qwen3", R"("auto")"));
  EXPECT_EQ(lazy.at("choice"), "auto");
  EXPECT_FALSE(lazy.contains("answer"));
  const json answered = output_of(chat_body("qwen3", R"("auto")", format));
  EXPECT_EQ(answered.at("answer").at("type"), "json_schema");
  EXPECT_FALSE(output_of(chat_body("qwen3", R"("required")", format)).contains("answer"));
  EXPECT_EQ(output_of(chat_body("qwen3", R"("auto")", R"(, "parallel_tool_calls": false)")).at("parallel"), false);
}

TEST(StrictToolsRequest, ToolsWithoutStrictLeaveTheOutputFree) {
  const json request = body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "tools": [)" +
                            std::string(kTimeTool) + R"(], "tool_choice": "required"})");
  EXPECT_TRUE(output_of(request).is_null());
}

TEST(StrictToolsRequest, SchemaTheGrammarCannotTakeIsA400NamingToolAndKeyword) {
  const json request = body(R"({"model": "qwen3", "messages": [{"role": "user", "content": "x"}], "tools": [
      {"type": "function", "function": {"name": "f", "strict": true, "parameters": {"type": "object",
      "properties": {"n": {"type": "integer", "multipleOf": 3}}}}}], "tool_choice": "auto"})");
  const ApiError e = chat_error(request);
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "invalid_value");
  EXPECT_EQ(e.param(), "tools");
  EXPECT_NE(std::string(e.what()).find("'f'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("multipleOf"), std::string::npos) << e.what();
}

TEST(StrictToolsRequest, NameTheFormatCannotCarryIsA400) {
  const json request = body(R"({"model": "gpt-oss", "messages": [{"role": "user", "content": "x"}], "tools": [
      {"type": "function", "function": {"name": "get weather", "strict": true}}], "tool_choice": "required"})");
  const ApiError e = chat_error(request);
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "tools");
  EXPECT_NE(std::string(e.what()).find("get weather"), std::string::npos) << e.what();
}

TEST(StrictToolsRequest, ModelWithoutAToolCallFormatRefusesStrictTools) {
  const ApiError e = chat_error(chat_body("plain", R"("required")"));
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "unsupported_parameter");
  EXPECT_EQ(e.param(), "tools");
}

json responses_output(const std::string& request_text) {
  const ResponsesRequest r = read_responses_request(body(request_text), test_models());
  return r.job.structured_output ? json::parse(*r.job.structured_output) : json();
}

TEST(StrictToolsRequest, ResponsesToolsAreStrictByDefault) {
  const json output = responses_output(R"({"model": "gpt-oss", "input": "x", "tool_choice": "required",
      "tools": [{"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}]})");
  EXPECT_EQ(output.at("format"), "harmony");
  EXPECT_EQ(output.at("choice"), "required");
  EXPECT_EQ(output.at("tools")[0].at("strict"), true);
  EXPECT_EQ(responses_output(R"({"model": "qwen3", "input": "x", "tools": [{"type": "function", "name": "f"}]})")
                .at("choice"),
            "auto");
  EXPECT_TRUE(responses_output(
                  R"({"model": "qwen3", "input": "x", "tools": [{"type": "function", "name": "f", "strict": false}]})")
                  .is_null());
  EXPECT_EQ(responses_output(R"({"model": "qwen3", "input": "x", "tools": [{"type": "function", "name": "f"}],
                "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}}})")
                .at("answer")
                .at("type"),
            "json_schema");
}

}  // namespace
}  // namespace flashq::gateway::testing
