// tool_choice: parsing OpenAI's forms, finish_reason, and violations of required / named.
#include "gateway/output/tool_choice.h"

#include <gtest/gtest.h>

#include "shared/error.h"

namespace flashq::gateway {
namespace {

using nlohmann::json;

AssistantMessage with_calls(std::vector<std::pair<std::string, bool>> calls) {
  AssistantMessage m;
  for (auto& [name, complete] : calls) m.tool_calls.push_back({"call_x", name, "{}", complete});
  return m;
}

TEST(ToolChoice, ParsesOpenAIForms) {
  EXPECT_EQ(parse_tool_choice("none", true).mode, ToolChoiceMode::kNone);
  EXPECT_EQ(parse_tool_choice("auto", true).mode, ToolChoiceMode::kAuto);
  EXPECT_EQ(parse_tool_choice("required", true).mode, ToolChoiceMode::kRequired);
  // Written as JSON text: a one-element braced list is read as an array by one compiler and an
  // object by another.
  const ToolChoice named =
      parse_tool_choice(json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"), true);
  EXPECT_EQ(named, (ToolChoice{ToolChoiceMode::kNamed, "get_weather"}));
  EXPECT_EQ(parse_tool_choice(nullptr, true).mode, ToolChoiceMode::kAuto);
  EXPECT_EQ(parse_tool_choice(nullptr, false).mode, ToolChoiceMode::kNone);
  EXPECT_FALSE(parses_tool_calls(parse_tool_choice("none", true)));
  EXPECT_TRUE(parses_tool_calls(parse_tool_choice("required", true)));
}

TEST(ToolChoice, RefusesWhatIsNotAToolChoiceWithInvalidArgument) {
  for (const json& bad : {json("always"), json(3), json::array(), json::parse(R"({"type": "tool"})"),
                          json::parse(R"({"type": "function"})"),
                          json::parse(R"({"type": "function", "function": "f"})"),
                          json::parse(R"({"type": "function", "function": {"name": ""}})")}) {
    try {
      parse_tool_choice(bad, true);
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad.dump();
      EXPECT_NE(std::string(e.what()).find("tool_choice"), std::string::npos);
    }
  }
  EXPECT_THROW(parse_tool_choice(json::parse(R"({"type": "function", "function": {"name": "f"}})"), false),
               Error);
}

TEST(ToolChoice, FinishReasonIsToolCallsOnlyForCompleteCalls) {
  const ToolChoice automatic{ToolChoiceMode::kAuto, ""};
  EXPECT_EQ(judge_tool_choice(automatic, with_calls({{"f", true}}), GenerationEnd::kStop).finish_reason, "tool_calls");
  EXPECT_EQ(judge_tool_choice(automatic, with_calls({}), GenerationEnd::kStop).finish_reason, "stop");
  EXPECT_EQ(judge_tool_choice(automatic, with_calls({}), GenerationEnd::kLength).finish_reason, "length");
  // A call cut by max_tokens (incremental streaming) is not a finished call.
  EXPECT_EQ(judge_tool_choice(automatic, with_calls({{"f", false}}), GenerationEnd::kLength).finish_reason, "length");
  EXPECT_FALSE(judge_tool_choice(automatic, with_calls({}), GenerationEnd::kStop).violated);
}

TEST(ToolChoice, RequiredWithoutACompleteCallIsViolated) {
  const ToolChoice required{ToolChoiceMode::kRequired, ""};
  EXPECT_TRUE(judge_tool_choice(required, with_calls({}), GenerationEnd::kStop).violated);
  EXPECT_TRUE(judge_tool_choice(required, with_calls({{"f", false}}), GenerationEnd::kLength).violated);
  EXPECT_FALSE(judge_tool_choice(required, with_calls({{"f", true}}), GenerationEnd::kStop).violated);
}

TEST(ToolChoice, NamedChoiceWantsThatFunctionOnly) {
  const ToolChoice named{ToolChoiceMode::kNamed, "get_weather"};
  EXPECT_FALSE(judge_tool_choice(named, with_calls({{"get_weather", true}}), GenerationEnd::kStop).violated);
  const ToolChoiceVerdict other =
      judge_tool_choice(named, with_calls({{"get_weather", true}, {"search", true}}), GenerationEnd::kStop);
  EXPECT_TRUE(other.violated);
  EXPECT_NE(other.violation.find("search"), std::string::npos);
  EXPECT_TRUE(judge_tool_choice(named, with_calls({}), GenerationEnd::kStop).violated);
}

TEST(ToolChoice, NoneWithACallIsViolated) {
  const ToolChoice none{ToolChoiceMode::kNone, ""};
  EXPECT_FALSE(judge_tool_choice(none, with_calls({}), GenerationEnd::kStop).violated);
  EXPECT_TRUE(judge_tool_choice(none, with_calls({{"f", true}}), GenerationEnd::kStop).violated);
}

}  // namespace
}  // namespace flashq::gateway
