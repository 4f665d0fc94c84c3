// gpt-oss's harmony messages: reasoning and answer, tool calls with the recipient on either side
// of the channel, several calls, every split of the text, both argument-streaming modes, requests
// without tools or reasoning, and malformed structure kept as content.
#include "gateway/output/harmony_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "gateway/output/output_parser_factory.h"
#include "tests/gateway/output_test_support.h"

namespace flashq::gateway {
namespace {

using testing::feed_pieces;
using testing::parse_every_split;

testing::ParserMaker harmony(ArgumentStreaming mode, bool tools = true, bool reasoning = true) {
  return [=] { return std::make_unique<HarmonyParser>(tools, reasoning, mode, index_tool_call_ids("call_job9_")); };
}

// Both modes give the same message for well-formed output.
AssistantMessage parse_both(std::string_view text) {
  return testing::parse_in_both_modes([](ArgumentStreaming mode) { return harmony(mode); }, text);
}

const auto call = testing::complete_call;

TEST(HarmonyParser, AnalysisIsReasoningAndFinalIsContent) {
  // As OpenAI's harmony guide shows the output after `<|start|>assistant`, with the <|return|>
  // the worker would not send (an end-of-sequence token) and without it.
  const std::string text =
      "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.";
  for (const std::string& output : {text, text + "<|return|>"}) {
    const AssistantMessage m = parse_both(output);
    EXPECT_EQ(m.reasoning, "User asks: \"What is 2 + 2?\" Simple arithmetic.");
    EXPECT_EQ(m.content, "2 + 2 = 4.");
    EXPECT_TRUE(m.tool_calls.empty());
  }
}

TEST(HarmonyParser, AnOutputThatBeginsInsideTheFinalMessageIsContent) {
  // A template whose generation prompt already opened `<|channel|>final<|message|>`.
  const AssistantMessage m = parse_both("Paris < London <|en <| to be sure.");
  EXPECT_EQ(m.content, "Paris < London <|en <| to be sure.");
  EXPECT_TRUE(m.reasoning.empty());
  EXPECT_EQ(parse_both(" to the point").content, " to the point");
  EXPECT_EQ(parse_both("<|chan").content, "<|chan");
}

TEST(HarmonyParser, CommentaryToAFunctionIsAToolCallWithTheChannelFirst) {
  const AssistantMessage m = parse_both(
      "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"location\":\"San Francisco\"}<|call|>");
  EXPECT_EQ(m.reasoning, "Need to use function get_weather.");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job9_0", "get_weather", "{\"location\":\"San Francisco\"}"));
}

TEST(HarmonyParser, TheRecipientMayComeBeforeTheChannel) {
  // As gpt-oss's chat template renders an assistant tool call, and with the call as the output's
  // first message (the recipient right after the prompt's `<|start|>assistant`).
  const std::string body = "{\"location\": \"Paris, France\", \"unit\": \"celsius\"}";
  AssistantMessage m = parse_both("<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>" +
                                  body + "<|call|>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job9_0", "get_weather", body));
  m = parse_both(" to=functions.get_weather<|channel|>commentary json<|message|>" + body);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job9_0", "get_weather", body));
  EXPECT_EQ(m.content, "");
}

TEST(HarmonyParser, TwoCallsAfterAPreambleAreNumberedInOrder) {
  const AssistantMessage m = parse_both(
      "<|channel|>analysis<|message|>Two cities: two calls.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Checking both.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"location\":\"Paris\"}<|call|>"
      "<|start|>assistant to=functions.search_files<|channel|>commentary json<|message|>"
      "{\"patterns\":[\"*.cpp\"]}<|call|>");
  EXPECT_EQ(m.reasoning, "Two cities: two calls.");
  EXPECT_EQ(m.content, "Checking both.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0], call("call_job9_0", "get_weather", "{\"location\":\"Paris\"}"));
  EXPECT_EQ(m.tool_calls[1], call("call_job9_1", "search_files", "{\"patterns\":[\"*.cpp\"]}"));
}

TEST(HarmonyParser, TwoWellFormedCallsBothComplete) {
  const AssistantMessage m = parse_both(
      "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|>"
      "<|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>"
      "{\"list\": [1, [2, {\"x\": null}]], \"q\": \"say \\\"hi\\\" 東京 🚀 <|\"}<|call|>");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0], call("call_job9_0", "a", "{}"));
  EXPECT_EQ(m.tool_calls[1],
            call("call_job9_1", "b", "{\"list\": [1, [2, {\"x\": null}]], \"q\": \"say \\\"hi\\\" 東京 🚀 <|\"}"));
  EXPECT_EQ(m.content, "");
}

TEST(HarmonyParser, ACallIsStreamedAsItComesInIncrementalMode) {
  HarmonyParser parser(true, true, ArgumentStreaming::kIncremental, index_tool_call_ids());
  const OutputDeltas first = parser.feed("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].kind, DeltaKind::kToolCallStart);
  EXPECT_EQ(first[0].name, "f");
  EXPECT_EQ(first[1].text, "{\"a\":");
  const OutputDeltas rest = parser.feed(" 1}<|ca");
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].text, " 1}");
  const OutputDeltas end = parser.feed("ll|>");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].kind, DeltaKind::kToolCallEnd);
}

TEST(HarmonyParser, MalformedCallArgumentsAreContentAsWrittenInValidatedMode) {
  const std::string text = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1<|call|>";
  const AssistantMessage validated = parse_every_split(harmony(ArgumentStreaming::kValidated), text);
  EXPECT_EQ(validated.content, text);
  EXPECT_TRUE(validated.tool_calls.empty());
  // Incremental: the call was started and stays without its end.
  const AssistantMessage incremental = parse_every_split(harmony(ArgumentStreaming::kIncremental), text);
  ASSERT_EQ(incremental.tool_calls.size(), 1u);
  EXPECT_EQ(incremental.tool_calls[0].arguments, "{\"a\": 1");
  EXPECT_FALSE(incremental.tool_calls[0].complete);
  EXPECT_EQ(incremental.content, "");
}

TEST(HarmonyParser, OtherRecipientsUnknownChannelsAndBrokenHeadersAreContentAsWritten) {
  for (const std::string& text : {
           std::string("<|channel|>analysis to=browser.search <|constrain|>json<|message|>{\"query\":\"x\"}<|call|>"),
           std::string("<|channel|>secret<|message|>hidden<|end|>"),
           std::string("<|channel|><|message|>no channel name<|end|>"),
           std::string("<|channel|>commentary to=functions. json<|message|>{}<|call|>"),
           std::string("<|channel|>final<|message|>ok<|end|><|start|>user<|message|>not mine<|end|>"),
       }) {
    SCOPED_TRACE(text);
    const AssistantMessage m = parse_both(text);
    EXPECT_TRUE(m.tool_calls.empty());
    EXPECT_TRUE(m.reasoning.empty());
    const std::string expected = text.starts_with("<|channel|>final<|message|>ok<|end|>")
                                     ? "ok" + text.substr(std::string("<|channel|>final<|message|>ok<|end|>").size())
                                     : text;
    EXPECT_EQ(m.content, expected);
  }
}

TEST(HarmonyParser, TextBetweenMessagesAndCutShortTagsAreContent) {
  AssistantMessage m = parse_both("<|channel|>analysis<|message|>hm<|end|>stray text");
  EXPECT_EQ(m.reasoning, "hm");
  EXPECT_EQ(m.content, "stray text");
  m = parse_both("<|channel|>analysis<|message|>hm<|end|><|sta");
  EXPECT_EQ(m.reasoning, "hm");
  EXPECT_EQ(m.content, "<|sta");
  m = parse_both("<|channel|>final<|message|>almost<|ret");
  EXPECT_EQ(m.content, "almost<|ret");
  m = parse_both("<|channel|>analysis<|mess");  // cut inside the header
  EXPECT_EQ(m.content, "<|channel|>analysis<|mess");
  EXPECT_TRUE(m.reasoning.empty());
}

TEST(HarmonyParser, AnOverlongHeaderIsContentAndNotHeldBack) {
  HarmonyParser parser(true, true, ArgumentStreaming::kValidated, index_tool_call_ids());
  const std::string header = "<|channel|>" + std::string(HarmonyParser::kMaxHeaderBytes, 'x');
  const OutputDeltas out = parser.feed(header + " more");
  AssistantMessage m = testing::fold(out);
  m.apply(parser.finish());
  EXPECT_EQ(m.content, header + " more");
  ASSERT_FALSE(out.empty());  // sent before the end, not held to it
}

TEST(HarmonyParser, WithoutToolsACallIsContentAndWithoutReasoningAnalysisIsToo) {
  const std::string text =
      "<|channel|>analysis<|message|>think<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>";
  AssistantMessage m = parse_every_split(harmony(ArgumentStreaming::kValidated, false, true), text);
  EXPECT_EQ(m.reasoning, "think");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>");
  m = parse_every_split(harmony(ArgumentStreaming::kValidated, true, false), text);
  EXPECT_EQ(m.content, "<|channel|>analysis<|message|>think<|end|>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_job9_0", "f", "{}"));
}

TEST(HarmonyParser, TheFactoryBuildsItForTheHarmonyFormat) {
  const OutputFormat harmony_format{ToolCallFormat::kHarmony, ReasoningFormat::kHarmony};
  const std::string text =
      "<|channel|>analysis<|message|>why<|end|><|start|>assistant<|channel|>final<|message|>because";
  const AssistantMessage m =
      parse_every_split([&] { return make_output_parser(harmony_format, OutputParserOptions{}); }, text);
  EXPECT_EQ(m.reasoning, "why");
  EXPECT_EQ(m.content, "because");
}

// Harmony's own pieces in random order (tags cut anywhere, headers with and without recipients,
// JSON fragments): the parser takes all of it, the same way in every split, with a stream OpenAI
// can send, and in the validated mode only calls whose arguments are one JSON object.
TEST(HarmonyParser, RandomHarmonyPiecesParseTheSameInEverySplit) {
  static const std::vector<std::string> pieces = {
      "<|channel|>",
      "<|message|>",
      "<|end|>",
      "<|return|>",
      "<|call|>",
      "<|start|>",
      "<|constrain|>",
      "<|chan",
      "<|",
      "assistant",
      "analysis",
      "final",
      "commentary",
      " to=functions.f",
      " to=browser.x",
      " json",
      "{",
      "}",
      "\"a\"",
      ":",
      "1",
      "\"",
      " ",
      "\n",
      "x",
      "é",
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
      "<|channel|>analysis<|message|>",
      "<|start|>assistant<|channel|>final<|message|>",
      "{\"location\":\"Paris\"}"};
  std::mt19937 random(21);
  int with_calls = 0, with_reasoning = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 20)(random);
    for (int i = 0; i < n; ++i)
      text += pieces[std::uniform_int_distribution<std::size_t>(0, pieces.size() - 1)(random)];
    for (ArgumentStreaming mode : {ArgumentStreaming::kValidated, ArgumentStreaming::kIncremental}) {
      AssistantMessage m;
      ASSERT_NO_THROW(m = parse_every_split(harmony(mode), text)) << text;
      with_calls += m.tool_calls.empty() ? 0 : 1;
      with_reasoning += m.reasoning.empty() ? 0 : 1;
      if (mode == ArgumentStreaming::kValidated) {
        for (const ParsedToolCall& c : m.tool_calls) {
          EXPECT_TRUE(c.complete) << text;
          EXPECT_TRUE(nlohmann::json::parse(c.arguments, nullptr, false).is_object()) << text;
        }
      }
      if (::testing::Test::HasFailure()) FAIL() << "text: " << text;
    }
  }
  // The texts reach the calls and the reasoning, not only the content path.
  EXPECT_GT(with_calls, 10);
  EXPECT_GT(with_reasoning, 5);
}

}  // namespace
}  // namespace flashq::gateway
