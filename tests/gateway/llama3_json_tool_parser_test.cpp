// Llama 3.x JSON tool calls: the whole message as a call, <|python_tag|>, several joined by ';',
// content messages (including JSON that is not a call), every split, and malformed calls.
#include "gateway/output/llama3_json_tool_parser.h"

#include <gtest/gtest.h>

#include "gateway/output/output_parser_factory.h"
#include "tests/gateway/output_test_support.h"

namespace flashq::gateway {
namespace {

using testing::parse_every_split;

testing::ParserMaker llama(ArgumentStreaming mode) {
  return [mode] { return std::make_unique<Llama3JsonToolParser>(mode, index_tool_call_ids()); };
}

// Both modes give the same message for well-formed output.
AssistantMessage parse_both(std::string_view text) { return testing::parse_in_both_modes(llama, text); }

const auto call = testing::complete_call;

TEST(Llama3JsonToolParser, PlainAnswerIsContent) {
  const AssistantMessage m = parse_both("  The capital of France is Paris. {not json} ; ok");
  EXPECT_EQ(m.content, "  The capital of France is Paris. {not json} ; ok");
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(Llama3JsonToolParser, TextBeforeACallMakesTheMessageAnAnswer) {
  // The call is the whole message in this format: an answer that shows a call's JSON is content.
  const std::string text = "To call it, write: {\"name\": \"f\", \"parameters\": {}}";
  const AssistantMessage m = parse_both(text);
  EXPECT_EQ(m.content, text);
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(Llama3JsonToolParser, WholeMessageCallWithParameters) {
  const AssistantMessage m = parse_both(
      "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris, France\", \"unit\": \"celsius\"}}");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_0", "get_weather", "{\"location\": \"Paris, France\", \"unit\": \"celsius\"}"));
  EXPECT_EQ(m.content, "");
}

TEST(Llama3JsonToolParser, PythonTagAndLeadingWhitespaceBeforeTheCall) {
  for (std::string_view lead : {"<|python_tag|>", "\n <|python_tag|> \n", "\n\n"}) {
    const AssistantMessage m =
        parse_both(std::string(lead) + "{\"name\": \"search\", \"arguments\": {\"query\": \"weather\"}}");
    ASSERT_EQ(m.tool_calls.size(), 1u) << lead;
    EXPECT_EQ(m.tool_calls[0], call("call_0", "search", "{\"query\": \"weather\"}"));
    EXPECT_EQ(m.content, "");
  }
}

TEST(Llama3JsonToolParser, SeveralCallsJoinedBySemicolons) {
  const AssistantMessage m = parse_both(
      "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}; "
      "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Rome\", \"days\": 2}};\n"
      "{\"name\": \"now\", \"parameters\": {}}");
  ASSERT_EQ(m.tool_calls.size(), 3u);
  EXPECT_EQ(m.tool_calls[0], call("call_0", "get_weather", "{\"location\": \"Paris\"}"));
  EXPECT_EQ(m.tool_calls[1], call("call_1", "get_weather", "{\"location\": \"Rome\", \"days\": 2}"));
  EXPECT_EQ(m.tool_calls[2], call("call_2", "now", "{}"));
  EXPECT_EQ(m.content, "");
}

TEST(Llama3JsonToolParser, ArgumentsWrittenAsAStringHoldingAnObjectAreDecoded) {
  // Llama 3.1's template renders arguments given as a string with tojson: a JSON string.
  const AssistantMessage m =
      parse_both("{\"name\": \"search_files\", \"parameters\": \"{\\\"patterns\\\": [\\\"*.cpp\\\"]}\"}");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_0", "search_files", "{\"patterns\": [\"*.cpp\"]}"));
  EXPECT_EQ(m.content, "");
}

TEST(Llama3JsonToolParser, TextAfterTheCallsIsContent) {
  const AssistantMessage m = parse_both("{\"name\": \"f\", \"parameters\": {\"s\": \"}{;\"}}\n\nDone, see above.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"s\": \"}{;\"}");
  EXPECT_EQ(m.content, "Done, see above.");
  const AssistantMessage trailing = parse_both("{\"name\": \"f\", \"parameters\": {}}; \n");
  EXPECT_EQ(trailing.tool_calls.size(), 1u);
  EXPECT_EQ(trailing.content, "");
}

TEST(Llama3JsonToolParser, JsonThatIsNotACallIsContent) {
  for (std::string_view text : {"{\"answer\": 4}", "{\"name\": \"Bob\", \"age\": 41}", "{}", "[1, 2]",
                                "<|python_tag|>brave_search.call(query=\"x\")"}) {
    const AssistantMessage m = parse_both(text);
    EXPECT_EQ(m.content, text);
    EXPECT_TRUE(m.tool_calls.empty()) << text;
  }
}

TEST(Llama3JsonToolParser, MalformedCallIsContentAsWritten) {
  for (std::string_view text : {
           "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Par",    // cut by max_tokens
           "{\"name\": \"get_weather\", \"parameters\": {\"location\": Paris}}",  // invalid JSON
           "{\"parameters\": {\"location\": \"Paris\"}}",                         // no name
           "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}",          // no closing brace
       }) {
    const AssistantMessage m = parse_every_split(llama(ArgumentStreaming::kValidated), text);
    EXPECT_EQ(m.content, text);
    EXPECT_TRUE(m.tool_calls.empty()) << text;
  }
}

TEST(Llama3JsonToolParser, MalformedSecondCallLeavesTheFirstAndTheRestAsContent) {
  const AssistantMessage m =
      parse_every_split(llama(ArgumentStreaming::kValidated),
                        "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"a\": nope}}");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0], call("call_0", "f", "{}"));
  EXPECT_EQ(m.content, "{\"name\": \"g\", \"parameters\": {\"a\": nope}}");
}

TEST(Llama3JsonToolParser, IncrementalModeStreamsArgumentsBeforeTheCallCloses) {
  Llama3JsonToolParser parser(ArgumentStreaming::kIncremental, index_tool_call_ids());
  const OutputDeltas first = parser.feed("<|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": \"we");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].kind, DeltaKind::kToolCallStart);
  EXPECT_EQ(first[0].name, "f");
  EXPECT_EQ(first[1].text, "{\"q\": \"we");
  const OutputDeltas rest = parser.feed("ather\"}}");
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].text, "ather\"}");
  EXPECT_EQ(rest[1].kind, DeltaKind::kToolCallEnd);
}

}  // namespace
}  // namespace flashq::gateway
