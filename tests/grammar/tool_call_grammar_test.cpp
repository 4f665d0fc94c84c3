// Strict tools' grammars (tool_call_grammar.h) per tool-call format: they take the calls each
// model family really writes, with arguments its tool's schema accepts, and refuse another
// function's name, arguments the schema refuses, and text around the call. The lazy ("auto")
// grammars are free until the format's trigger and constrain the call after it; a GrammarMatcher
// over byte tokens rolls back across the trigger exactly.
#include "worker/grammar/tool_call_grammar.h"

#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/grammar/grammar_test_support.h"
#include "worker/grammar/gbnf_text.h"
#include "worker/grammar/structured_output.h"

namespace flashq::grammar {
namespace {

using testing::accepts;

constexpr const char* kWeather =
    R"({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"], "additionalProperties": false})";
constexpr const char* kTime =
    R"({"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"], "additionalProperties": false})";

ToolCallRequest request(ToolCallSyntax syntax, ToolCallChoice choice) {
  ToolCallRequest r{.syntax = syntax, .choice = choice};
  r.tools = {{.name = "get_weather", .parameters_json = kWeather}, {.name = "get_time", .parameters_json = kTime}};
  if (choice == ToolCallChoice::kNamed) r.tools.resize(1);
  return r;
}

const std::string kParis = R"({"city": "Paris", "unit": "celsius"})";
const std::string kHermesParis = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + kParis + "}\n</tool_call>";
const std::string kHermesTime = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>";

TEST(ToolCallGrammarTest, HermesRequiredTakesQwen3CallsOfAnyTool) {
  const std::string gbnf = tool_call_grammar(request(ToolCallSyntax::kHermes, ToolCallChoice::kRequired));
  EXPECT_TRUE(accepts(gbnf, kHermesParis));
  EXPECT_TRUE(accepts(gbnf, kHermesTime));
  EXPECT_TRUE(accepts(gbnf, kHermesParis + "\n" + kHermesTime)) << "parallel calls, one per block";
}

TEST(ToolCallGrammarTest, HermesRequiredRefusesTextWrongNamesAndArguments) {
  const std::string gbnf = tool_call_grammar(request(ToolCallSyntax::kHermes, ToolCallChoice::kRequired));
  EXPECT_FALSE(accepts(gbnf, "")) << "the call is required";
  EXPECT_FALSE(accepts(gbnf, "Sure. " + kHermesParis)) << "text before the call";
  EXPECT_FALSE(accepts(gbnf, "<tool_call>\n{\"name\": \"get_news\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(gbnf, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"))
      << "a required property missing";
  EXPECT_FALSE(accepts(gbnf, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                             "\"unit\": \"kelvin\"}}\n</tool_call>"))
      << "a value the enum refuses";
  EXPECT_FALSE(accepts(gbnf, kHermesParis.substr(0, kHermesParis.size() - 3))) << "a call cut short";
}

TEST(ToolCallGrammarTest, NamedChoiceTakesOnlyThatFunction) {
  const std::string gbnf = tool_call_grammar(request(ToolCallSyntax::kHermes, ToolCallChoice::kNamed));
  EXPECT_TRUE(accepts(gbnf, kHermesParis));
  EXPECT_FALSE(accepts(gbnf, kHermesTime));
}

TEST(ToolCallGrammarTest, OneCallWhenParallelCallsAreOff) {
  ToolCallRequest r = request(ToolCallSyntax::kHermes, ToolCallChoice::kRequired);
  r.parallel = false;
  const std::string gbnf = tool_call_grammar(r);
  EXPECT_TRUE(accepts(gbnf, kHermesParis));
  EXPECT_FALSE(accepts(gbnf, kHermesParis + "\n" + kHermesTime));
}

TEST(ToolCallGrammarTest, ReasoningComesFirstWhereTheModelReasons) {
  ToolCallRequest r = request(ToolCallSyntax::kHermes, ToolCallChoice::kRequired);
  r.reasoning = ReasoningStart::kOptional;
  std::string gbnf = tool_call_grammar(r);
  EXPECT_TRUE(accepts(gbnf, "<think>\nThe user wants Paris.\n</think>\n\n" + kHermesParis));
  EXPECT_TRUE(accepts(gbnf, kHermesParis));
  EXPECT_FALSE(accepts(gbnf, "<think>\nThe user wants Paris.\n</think>\n\n")) << "reasoning alone never ends";
  r.reasoning = ReasoningStart::kInside;
  gbnf = tool_call_grammar(r);
  EXPECT_TRUE(accepts(gbnf, "The user wants Paris.\n</think>\n\n" + kHermesParis));
  EXPECT_FALSE(accepts(gbnf, kHermesParis)) << "the prompt opened the reasoning, which must close first";
}

TEST(ToolCallGrammarTest, NonStrictToolTakesAnyJsonObject) {
  ToolCallRequest r = request(ToolCallSyntax::kHermes, ToolCallChoice::kNamed);
  r.tools[0].strict = false;
  const std::string gbnf = tool_call_grammar(r);
  EXPECT_TRUE(accepts(gbnf, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>"));
  EXPECT_FALSE(accepts(gbnf, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1]}\n</tool_call>"));
}

TEST(ToolCallGrammarTest, Llama3JsonTakesTheBareCallAndSemicolonJoinedCalls) {
  const std::string gbnf = tool_call_grammar(request(ToolCallSyntax::kLlama3Json, ToolCallChoice::kRequired));
  const std::string paris = "{\"name\": \"get_weather\", \"parameters\": " + kParis + "}";
  EXPECT_TRUE(accepts(gbnf, paris));
  EXPECT_TRUE(accepts(gbnf, paris + "; {\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}"));
  EXPECT_FALSE(accepts(gbnf, "{\"name\": \"get_weather\", \"arguments\": " + kParis + "}"));
  EXPECT_FALSE(accepts(gbnf, "{\"name\": \"get_news\", \"parameters\": {}}"));
}

TEST(ToolCallGrammarTest, HarmonyTakesTheCommentaryCallAfterOptionalAnalysis) {
  ToolCallRequest r = request(ToolCallSyntax::kHarmony, ToolCallChoice::kRequired);
  r.reasoning = ReasoningStart::kOptional;
  const std::string gbnf = tool_call_grammar(r);
  const std::string call = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + kParis;
  EXPECT_TRUE(accepts(gbnf, call));
  EXPECT_TRUE(accepts(gbnf, "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant" + call));
  EXPECT_FALSE(accepts(gbnf, "<|channel|>final<|message|>Hi"));
  EXPECT_FALSE(accepts(gbnf, "<|channel|>commentary to=functions.get_news <|constrain|>json<|message|>{}"));
  EXPECT_FALSE(accepts(gbnf, call + "<|start|>assistant" + call)) << "a harmony call ends the turn";
  EXPECT_TRUE(spells_special_tokens(ToolCallSyntax::kHarmony));
}

TEST(ToolCallGrammarTest, LazyHermesIsFreeUntilTheTriggerThenConstrained) {
  const std::string gbnf = tool_call_grammar(request(ToolCallSyntax::kHermes, ToolCallChoice::kAuto));
  EXPECT_TRUE(accepts(gbnf, ""));
  EXPECT_TRUE(accepts(gbnf, "<think>\nhm\n</think>\n\nIt is sunny <tool_c, I think."));
  EXPECT_TRUE(accepts(gbnf, "Let me look.\n" + kHermesParis));
  EXPECT_FALSE(accepts(gbnf, "Let me look.\n<tool_call>\n{\"name\": \"get_news\""));
  EXPECT_FALSE(accepts(gbnf, "Let me look.\n<tool_call>")) << "once opened, the call must be complete";
  EXPECT_FALSE(accepts(gbnf, kHermesParis + " and some text")) << "nothing after the calls";
}

TEST(ToolCallGrammarTest, LazyLlama3IsFreeUnlessTheMessageStartsWithABrace) {
  const std::string gbnf = tool_call_grammar(request(ToolCallSyntax::kLlama3Json, ToolCallChoice::kAuto));
  EXPECT_TRUE(accepts(gbnf, "The weather is {fine}."));
  EXPECT_TRUE(accepts(gbnf, "{\"name\": \"get_weather\", \"parameters\": " + kParis + "}"));
  EXPECT_FALSE(accepts(gbnf, "{\"weather\": 1}"));
  EXPECT_FALSE(accepts(gbnf, "  {\"weather\": 1}")) << "the parser skips leading whitespace, so does the trigger";
}

TEST(ToolCallGrammarTest, LazyHarmonyIsFreeUntilTheRecipient) {
  const std::string gbnf = tool_call_grammar(request(ToolCallSyntax::kHarmony, ToolCallChoice::kAuto));
  EXPECT_TRUE(accepts(gbnf, "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Hi"));
  EXPECT_TRUE(accepts(gbnf, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + kParis));
  EXPECT_TRUE(accepts(gbnf, " to=functions.get_time<|channel|>commentary <|constrain|>json<|message|>{\"zone\": \"UTC\"}"));
  EXPECT_FALSE(accepts(gbnf, "<|channel|>commentary to=functions.get_news <|constrain|>json<|message|>{}"));
}

TEST(ToolCallGrammarTest, AutoWithAnAnswerFormatIsTheAnswerOrACall) {
  ToolCallRequest r = request(ToolCallSyntax::kHermes, ToolCallChoice::kAuto);
  r.answer = GrammarRequest{.format = GrammarFormat::kJsonSchema, .text = kTime};
  const std::string gbnf = tool_call_grammar(r);
  EXPECT_TRUE(accepts(gbnf, "{\"zone\": \"CET\"}"));
  EXPECT_TRUE(accepts(gbnf, kHermesParis));
  EXPECT_FALSE(accepts(gbnf, "The zone is CET."));
}

TEST(ToolCallGrammarTest, RefusesBadNamesAndSchemasNamingTheTool) {
  ToolCallRequest r = request(ToolCallSyntax::kHermes, ToolCallChoice::kRequired);
  r.tools[1].parameters_json = R"({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}})";
  try {
    (void)tool_call_grammar(r);
    FAIL() << "an unsupported keyword was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("get_time"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("multipleOf"), std::string::npos) << e.what();
  }
  r = request(ToolCallSyntax::kHarmony, ToolCallChoice::kRequired);
  r.tools[0].name = "get weather";
  EXPECT_THROW((void)tool_call_grammar(r), Error);
  r.tools.clear();
  EXPECT_THROW((void)tool_call_grammar(r), Error);
}

TEST(ToolCallGrammarTest, TextWithoutRulesRefuseExactlyTheTextsHoldingTheString) {
  const std::string gbnf = "root ::= free\n" + text_without_rules("free", "<tool_call>");
  for (const char* text : {"", "<", "<tool_cal", "<<tool_cal>", "a<tool_callx", "é<tool_c"}) {
    EXPECT_TRUE(accepts(gbnf, text)) << text;
  }
  for (const char* text : {"<tool_call>", "<<tool_call>", "x<tool_call>y"}) EXPECT_FALSE(accepts(gbnf, text)) << text;
}

TEST(ToolCallGrammarTest, PrefixedRulesKeepLiteralsClassesAndRepetitions) {
  EXPECT_EQ(prefix_rule_names("root ::= a \"b c\" [a-z]{2,3} # c d\na ::= \"\\\"x\" b-1\n", "t0-"),
            "t0-root ::= t0-a \"b c\" [a-z]{2,3} # c d\nt0-a ::= \"\\\"x\" t0-b-1\n");
}

TEST(ToolCallGrammarTest, StructuredOutputReadsTheToolCallsType) {
  const GrammarRequest r = read_structured_output(
      R"({"type": "tool_calls", "format": "harmony", "choice": "named", "tools": [{"name": "get_time", "parameters": )" +
      std::string(kTime) + R"(, "strict": true}], "reasoning": "optional"})");
  EXPECT_EQ(r.format, GrammarFormat::kGbnf);
  EXPECT_TRUE(r.spells_special_tokens);
  EXPECT_TRUE(accepts(r.text, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"zone\": \"UTC\"}"));
  EXPECT_THROW((void)read_structured_output(R"({"type": "tool_calls", "format": "xml", "choice": "auto", "tools": []})"),
               Error);
}

// The lazy grammar as a matcher over byte tokens: free text may end anywhere, the trigger engages
// the call, which may end only when complete, and rolling back across the trigger frees it again.
TEST(ToolCallGrammarTest, LazyMatcherRollsBackAcrossTheTrigger) {
  GrammarMatcher matcher(testing::compile(tool_call_grammar(request(ToolCallSyntax::kHermes, ToolCallChoice::kAuto)),
                                          testing::byte_tokens()));
  const std::string free_text = "Hi <tool";
  for (char c : free_text) ASSERT_TRUE(matcher.accept_token(static_cast<unsigned char>(c)));
  EXPECT_TRUE(matcher.can_end()) << "free text may end";
  for (char c : std::string("_call>\n{\"name\": ")) ASSERT_TRUE(matcher.accept_token(static_cast<unsigned char>(c)));
  EXPECT_FALSE(matcher.can_end()) << "an opened call may not end";
  EXPECT_FALSE(matcher.accept_token('x')) << "only a tool's name comes next";
  matcher.rollback(16);
  EXPECT_TRUE(matcher.can_end());
  EXPECT_TRUE(matcher.accept_token('x')) << "before the trigger, anything goes";
}

}  // namespace
}  // namespace flashq::grammar
