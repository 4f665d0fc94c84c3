// Qwen3 / Hermes <tool_call> blocks: calls, content around them, every split of the text, both
// argument-streaming modes, and each kind of malformed block.
#include "gateway/output/hermes_tool_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gateway/output/output_parser_factory.h"
#include "tests/gateway/output_test_support.h"

namespace flashq::gateway {
namespace {

using testing::feed_pieces;
using testing::parse_every_split;

testing::ParserMaker hermes(ArgumentStreaming mode) {
  return [mode] { return std::make_unique<HermesToolParser>(mode, index_tool_call_ids("call_job7_")); };
}

// Both modes give the same message for well-formed output.
AssistantMessage parse_both(std::string_view text) { return testing::parse_in_both_modes(hermes, text); }

const auto call = testing::complete_call;

TEST(HermesToolParser, TextWithoutCallsIsContent) {
  const AssistantMessage m = parse_both("Hello! I am <b>fine</b>, thanks < > <tool_cal> done.");
  EXPECT_EQ(m.content, "Hello! I am <b>fine</b>, thanks < > <tool_cal> done.");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_TRUE(m.reasoning.empty());
}

TEST(HermesToolParser, OneCallBecomesToolCallWithModelsArguments) {
  const AssistantMessage m =
      parse_both("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job7_0", "get_weather", "{\"location\": \"Paris\"}"));
}

TEST(HermesToolParser, ContentBeforeSeveralCallsLosesOnlyLayoutWhitespace) {
  const AssistantMessage m = parse_both(
      "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"location\": \"Rome\", \"days\": 2}}\n</tool_call>");
  EXPECT_EQ(m.content, "Let me check both.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0], call("call_job7_0", "get_weather", "{\"location\": \"Paris\"}"));
  EXPECT_EQ(m.tool_calls[1], call("call_job7_1", "get_weather", "{\"location\": \"Rome\", \"days\": 2}"));
}

TEST(HermesToolParser, ContentAfterACallIsContent) {
  const AssistantMessage m =
      parse_both("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n\nCalled it.  \n");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job7_0", "f", "{}"));
  EXPECT_EQ(m.content, "Called it.  \n");
}

TEST(HermesToolParser, ArgumentsKeepBracesTagsEscapesAndUnicodeInStrings) {
  const std::string args =
      R"({"code": "if (a) { b(); } </tool_call> ]", "q": "say \"hi\\\"", "list": [1, [2, {"x": null}]], "city": "Zürich 東京 🚀"})";
  const AssistantMessage m = parse_both("<tool_call>\n{\"name\": \"run\", \"arguments\": " + args + "}\n</tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, args);
  EXPECT_TRUE(nlohmann::json::accept(m.tool_calls[0].arguments));
  EXPECT_EQ(m.content, "");
}

TEST(HermesToolParser, CompactJsonParametersKeyAndEscapedNameAreRead) {
  const AssistantMessage m =
      parse_both("<tool_call>{\"name\":\"get_\\u0077eather\",\"parameters\":{\"a\":1}}</tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job7_0", "get_weather", "{\"a\":1}"));
}

TEST(HermesToolParser, CompleteCallWithoutClosingTagStands) {
  // A stop string or the end of generation can cut </tool_call>.
  for (std::string_view end : {"", "\n", "\n</tool_", "\n</tool_call"}) {
    const AssistantMessage m =
        parse_both(std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}") + std::string(end));
    ASSERT_EQ(m.tool_calls.size(), 1u) << end;
    EXPECT_TRUE(m.tool_calls[0].complete);
    EXPECT_EQ(m.content, "") << end;
  }
}

TEST(HermesToolParser, CallWithoutClosingTagFollowedByTextLeavesTextAsContent) {
  const AssistantMessage m = parse_both(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\nand then <tool_call>{\"name\": \"g\", "
      "\"arguments\": {}}</tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[1].name, "g");
  EXPECT_EQ(m.content, "and then");
}

TEST(HermesToolParser, PartialTagAtTheEndIsContent) {
  const AssistantMessage m = parse_both("Hi there <tool_");
  EXPECT_EQ(m.content, "Hi there <tool_");
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(HermesToolParser, IdsComeFromTheGivenGenerator) {
  auto parser = std::make_unique<HermesToolParser>(ArgumentStreaming::kValidated,
                                                   [](int i) { return "call_abc_" + std::to_string(i * 10); });
  const OutputDeltas d = feed_pieces(*parser, {"<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"
                                               "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>"});
  const AssistantMessage m = testing::fold(d);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].id, "call_abc_0");
  EXPECT_EQ(m.tool_calls[1].id, "call_abc_10");
}

// --- the two streaming modes --------------------------------------------------------------

constexpr std::string_view kPrefix = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"loc";
constexpr std::string_view kRest = "ation\": \"Paris\"}}\n</tool_call>";

TEST(HermesToolParser, IncrementalModeSendsNameThenArgumentFragmentsAsTheyArrive) {
  HermesToolParser parser(ArgumentStreaming::kIncremental, index_tool_call_ids());
  const OutputDeltas first = parser.feed(kPrefix);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].kind, DeltaKind::kContent);
  EXPECT_EQ(first[0].text, "Sure.");
  EXPECT_EQ(first[1].kind, DeltaKind::kToolCallStart);
  EXPECT_EQ(first[1].id, "call_0");
  EXPECT_EQ(first[1].name, "get_weather");
  EXPECT_EQ(first[2].kind, DeltaKind::kToolCallArguments);
  EXPECT_EQ(first[2].text, "{\"loc");
  const OutputDeltas second = parser.feed(kRest);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].kind, DeltaKind::kToolCallArguments);
  EXPECT_EQ(second[0].text, "ation\": \"Paris\"}");
  EXPECT_TRUE(second[0].id.empty() && second[0].name.empty());
  EXPECT_EQ(second[1].kind, DeltaKind::kToolCallEnd);
  EXPECT_TRUE(parser.finish().empty());
}

TEST(HermesToolParser, ValidatedModeHoldsTheCallUntilItsObjectCloses) {
  HermesToolParser parser(ArgumentStreaming::kValidated, index_tool_call_ids());
  const OutputDeltas first = parser.feed(kPrefix);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].text, "Sure.");
  const OutputDeltas second = parser.feed(kRest);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0].kind, DeltaKind::kToolCallStart);
  EXPECT_EQ(second[1].kind, DeltaKind::kToolCallArguments);
  EXPECT_EQ(second[1].text, "{\"location\": \"Paris\"}");
  EXPECT_EQ(second[2].kind, DeltaKind::kToolCallEnd);
}

// --- malformed output ---------------------------------------------------------------------

// In validated mode a malformed block is content exactly as the model wrote it.
void expect_content_as_written(std::string_view text) {
  const AssistantMessage m = parse_every_split(hermes(ArgumentStreaming::kValidated), text);
  EXPECT_EQ(m.content, text);
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(HermesToolParser, UnterminatedBlockIsContent) {
  expect_content_as_written("Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Pa");
  expect_content_as_written("<tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"get_weather\"");
}

TEST(HermesToolParser, InvalidJsonInsideIsContent) {
  expect_content_as_written(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": Paris}}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{name: \"get_weather\", arguments: {}}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2}}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1,}}\n</tool_call>");
}

TEST(HermesToolParser, MissingOrEmptyNameIsContent) {
  expect_content_as_written("<tool_call>\n{\"arguments\": {\"location\": \"Paris\"}}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"f\"}\n</tool_call>");
}

TEST(HermesToolParser, ArgumentsThatAreNotAnObjectAreContent) {
  expect_content_as_written("<tool_call>\n{\"name\": \"f\", \"arguments\": \"Paris\"}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"f\", \"arguments\": \"[1]\"}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>");
  expect_content_as_written("<tool_call>\n{\"name\": \"f\", \"arguments\": {}, \"extra\": 1}\n</tool_call>");
}

TEST(HermesToolParser, MalformedBlockDoesNotStopLaterCalls) {
  const AssistantMessage m = parse_every_split(
      hermes(ArgumentStreaming::kValidated),
      "<tool_call>\n{bad}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(m.content, "<tool_call>\n{bad}\n</tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job7_0", "g", "{}"));
}

TEST(HermesToolParser, IncrementalCallCutInItsArgumentsStaysIncomplete) {
  const AssistantMessage m =
      parse_every_split(hermes(ArgumentStreaming::kIncremental),
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Pa");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_FALSE(m.tool_calls[0].complete);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"location\": \"Pa");
  EXPECT_EQ(m.content, "");
}

TEST(HermesToolParser, IncrementalCallBrokenAfterItsStartLeavesTheRestAsContent) {
  const AssistantMessage m =
      parse_every_split(hermes(ArgumentStreaming::kIncremental),
                        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1}, \"b\": 2}\n</tool_call>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_FALSE(m.tool_calls[0].complete);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"a\": [1");
  EXPECT_EQ(m.content, "}, \"b\": 2}\n</tool_call>");
  // Before the start, the incremental mode gives a block back as content like the validated one.
  const AssistantMessage early =
      parse_every_split(hermes(ArgumentStreaming::kIncremental), "<tool_call>\n{\"nam\": 1}</tool_call>");
  EXPECT_EQ(early.content, "<tool_call>\n{\"nam\": 1}</tool_call>");
}

}  // namespace
}  // namespace flashq::gateway
