// Output made of the formats' own pieces in random order (tags cut anywhere, braces, quotes,
// escapes, keys): every parser takes all of it without throwing, gives the same message however
// the text is split, sends a stream OpenAI can send, and in the validated mode sends only calls
// whose arguments are one JSON object.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "gateway/output/output_parser_factory.h"
#include "tests/gateway/output_test_support.h"

namespace flashq::gateway {
namespace {

std::string random_output(std::mt19937& random) {
  static const std::vector<std::string> pieces = {
      "<tool_call>", "</tool_call>", "<tool_", "{", "}", "[", "]", "\"name\"", "\"arguments\"",
      "\"parameters\"", ":", ",", ";", "\"f\"", "\"", "\\", "\\\"", " ", "\n", "x", "1", "null",
      "<think>", "</think>", "</th", "<|python_tag|>", "é", "{\"name\": \"g\", \"arguments\": ",
      "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>"};
  std::string text;
  const int n = std::uniform_int_distribution<int>(0, 24)(random);
  for (int i = 0; i < n; ++i) {
    text += pieces[std::uniform_int_distribution<std::size_t>(0, pieces.size() - 1)(random)];
  }
  return text;
}

TEST(RandomOutput, EveryParserTakesAnyTextTheSameWayInEverySplit) {
  const std::vector<OutputFormat> formats = {
      {ToolCallFormat::kHermes, ReasoningFormat::kThinkTags},
      {ToolCallFormat::kHermes, ReasoningFormat::kNone},
      {ToolCallFormat::kLlama3Json, ReasoningFormat::kNone},
  };
  std::mt19937 random(20);
  int with_calls = 0, with_reasoning = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const std::string text = random_output(random);
    for (const OutputFormat& format : formats) {
      for (ArgumentStreaming mode : {ArgumentStreaming::kValidated, ArgumentStreaming::kIncremental}) {
        OutputParserOptions options;
        options.argument_streaming = mode;
        options.starts_in_reasoning = trial % 5 == 0;
        AssistantMessage m;
        ASSERT_NO_THROW(m = testing::parse_every_split(
                            [&] { return make_output_parser(format, options); }, text))
            << text;
        with_calls += m.tool_calls.empty() ? 0 : 1;
        with_reasoning += m.reasoning.empty() ? 0 : 1;
        if (mode == ArgumentStreaming::kValidated) {
          for (const ParsedToolCall& call : m.tool_calls) {
            EXPECT_TRUE(call.complete) << text;
            EXPECT_TRUE(nlohmann::json::parse(call.arguments, nullptr, false).is_object()) << text;
          }
        }
        if (::testing::Test::HasFailure()) {
          FAIL() << "format " << tool_call_format_name(format.tool_calls) << "/"
                 << reasoning_format_name(format.reasoning) << ", text: " << text;
        }
      }
    }
  }
  // The texts reach every part of the parsers, not only their content path.
  EXPECT_GT(with_calls, 50);
  EXPECT_GT(with_reasoning, 20);
}

}  // namespace
}  // namespace flashq::gateway

namespace flashq::gateway {
namespace {

// Degenerate output (a model writing blank lines until max_tokens) is held as layout: each parser
// takes it, with the call or answer after it, without rescanning the run at every byte.
TEST(RandomOutput, LongWhitespaceRunsBeforeTagsAndCalls) {
  const std::string run(200000, '\n');
  OutputParserOptions options;
  auto parse = [&](OutputFormat format, const std::string& text) {
    auto parser = make_output_parser(format, options);
    OutputDeltas deltas;
    for (std::size_t at = 0; at < text.size(); at += 3) append_deltas(deltas, parser->feed(std::string_view(text).substr(at, 3)));
    append_deltas(deltas, parser->finish());
    return testing::fold(deltas);
  };
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  AssistantMessage m = parse({ToolCallFormat::kHermes, ReasoningFormat::kThinkTags},
                             "<think>\nA" + run + "</think>" + run + "B" + run + call + run);
  EXPECT_EQ(m.reasoning, "A");
  EXPECT_EQ(m.content, "B");
  EXPECT_EQ(m.tool_calls.size(), 1u);
  m = parse({ToolCallFormat::kLlama3Json, ReasoningFormat::kNone},
            run + "<|python_tag|>" + run + "{\"name\": \"f\", \"parameters\": {}};" + run +
                "{\"name\": \"g\", \"parameters\": {}}" + run);
  EXPECT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.content, "");
}

}  // namespace
}  // namespace flashq::gateway
