// Qwen3 reasoning: <think> written by the model, opened by the template, absent with thinking
// off; reasoning in front of tool calls; every split of the text.
#include "gateway/output/think_tag_parser.h"

#include <gtest/gtest.h>

#include "gateway/output/hermes_tool_parser.h"
#include "gateway/output/output_parser_factory.h"
#include "gateway/output/plain_output_parser.h"
#include "tests/gateway/output_test_support.h"

namespace flashq::gateway {
namespace {

using testing::parse_every_split;

testing::ParserMaker think_then_plain(bool starts_in_reasoning) {
  return [starts_in_reasoning] {
    return std::make_unique<ThinkTagParser>(std::make_unique<PlainOutputParser>(), starts_in_reasoning);
  };
}

testing::ParserMaker think_then_hermes(ArgumentStreaming mode) {
  return [mode] {
    return std::make_unique<ThinkTagParser>(
        std::make_unique<HermesToolParser>(mode, index_tool_call_ids()), false);
  };
}

TEST(ThinkTagParser, ReasoningWrittenByTheModelIsSplitFromTheAnswer) {
  const AssistantMessage m =
      parse_every_split(think_then_plain(false), "<think>\n17 * 3 = 51.\nCheck: 50 + 1.\n</think>\n\n51");
  EXPECT_EQ(m.reasoning, "17 * 3 = 51.\nCheck: 50 + 1.");
  EXPECT_EQ(m.content, "51");
}

TEST(ThinkTagParser, OutputStartsInsideReasoningTheTemplateOpened) {
  const AssistantMessage m =
      parse_every_split(think_then_plain(true), "\nThe user greets me.\n</think>\n\nHello!");
  EXPECT_EQ(m.reasoning, "The user greets me.");
  EXPECT_EQ(m.content, "Hello!");
}

TEST(ThinkTagParser, WithoutThinkingEverythingIsContent) {
  // enable_thinking=false: the prompt closed an empty <think> block; the output has none.
  const AssistantMessage m = parse_every_split(think_then_plain(false), "Hi! </think> is a tag, <think> too.");
  EXPECT_EQ(m.content, "Hi! </think> is a tag, <think> too.");
  EXPECT_EQ(m.reasoning, "");
  const AssistantMessage partial = parse_every_split(think_then_plain(false), "<thin");
  EXPECT_EQ(partial.content, "<thin");
}

TEST(ThinkTagParser, TagsAndNewlinesInsideReasoningAreText) {
  const AssistantMessage m = parse_every_split(
      think_then_plain(false), "<think>\n\nA </thi> B <think>\n\n C\n</think>\n\n\nD\n\nE\n");
  EXPECT_EQ(m.reasoning, "A </thi> B <think>\n\n C");
  EXPECT_EQ(m.content, "D\n\nE\n");
}

TEST(ThinkTagParser, ReasoningCutByMaxTokensStaysReasoning) {
  const AssistantMessage m = parse_every_split(think_then_plain(false), "<think>\nLet me think about </th");
  EXPECT_EQ(m.reasoning, "Let me think about </th");
  EXPECT_EQ(m.content, "");
  const AssistantMessage newline_end = parse_every_split(think_then_plain(false), "<think>\nHmm.\n\n");
  EXPECT_EQ(newline_end.reasoning, "Hmm.");
}

TEST(ThinkTagParser, ReasoningThenToolCalls) {
  const std::string text =
      "<think>\nThe user wants the weather; <tool_call> is how I call.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>";
  for (ArgumentStreaming mode : {ArgumentStreaming::kValidated, ArgumentStreaming::kIncremental}) {
    const AssistantMessage m = parse_every_split(think_then_hermes(mode), text);
    EXPECT_EQ(m.reasoning, "The user wants the weather; <tool_call> is how I call.");
    EXPECT_EQ(m.content, "");
    ASSERT_EQ(m.tool_calls.size(), 1u);
    EXPECT_EQ(m.tool_calls[0].name, "get_weather");
    EXPECT_EQ(m.tool_calls[0].arguments, "{\"location\": \"Paris\"}");
  }
}

TEST(ThinkTagParser, ReasoningIsSentAsItComes) {
  ThinkTagParser parser(std::make_unique<PlainOutputParser>(), false);
  const OutputDeltas first = parser.feed("<think>\nStep one");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, DeltaKind::kReasoning);
  EXPECT_EQ(first[0].text, "Step one");
  const OutputDeltas second = parser.feed(".\n</think>\n\nAnswer");
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].kind, DeltaKind::kReasoning);
  EXPECT_EQ(second[0].text, ".");
  EXPECT_EQ(second[1].kind, DeltaKind::kContent);
  EXPECT_EQ(second[1].text, "Answer");
}

}  // namespace
}  // namespace flashq::gateway
