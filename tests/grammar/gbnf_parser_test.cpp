// The GBNF subset of docs/grammar.md: what each construct accepts, and each refusal typed and named.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/grammar/grammar_test_support.h"

namespace flashq::grammar {
namespace {

using testing::accepts;

void expect_refused(const std::string& gbnf, const std::string& named) {
  try {
    parse_gbnf(gbnf);
    FAIL() << "accepted: " << gbnf;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
  }
}

TEST(GrammarGbnfParser, LiteralMatchesExactlyItsText) {
  EXPECT_TRUE(accepts(R"(root ::= "yes")", "yes"));
  EXPECT_FALSE(accepts(R"(root ::= "yes")", "ye"));
  EXPECT_FALSE(accepts(R"(root ::= "yes")", "yess"));
}

TEST(GrammarGbnfParser, AlternativesGroupsAndRuleReferences) {
  const char* g = R"(root ::= ("a" | "b") tail
tail ::= "c" | "d" "e")";
  EXPECT_TRUE(accepts(g, "ac"));
  EXPECT_TRUE(accepts(g, "bde"));
  EXPECT_FALSE(accepts(g, "ad"));
}

TEST(GrammarGbnfParser, CharacterClassesRangesAndNegation) {
  EXPECT_TRUE(accepts(R"(root ::= [a-z0-9_]+)", "abc_9"));
  EXPECT_FALSE(accepts(R"(root ::= [a-z]+)", "abC"));
  EXPECT_TRUE(accepts(R"(root ::= "\"" [^"\\]* "\"")", "\"h\xC3\xA9llo \xF0\x9F\x98\x80\""));
  EXPECT_FALSE(accepts(R"(root ::= "\"" [^"\\]* "\"")", "\"a\"b\""));
}

TEST(GrammarGbnfParser, ClassesAreCodePointsSoInvalidUtf8IsRefused) {
  EXPECT_FALSE(accepts(R"(root ::= [^a]*)", "\xC3"));
  EXPECT_FALSE(accepts(R"(root ::= .*)", "\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(accepts(R"(root ::= [é-ë])", "\xC3\xAA"));
}

TEST(GrammarGbnfParser, EscapesNameCodePoints) {
  EXPECT_TRUE(accepts(R"(root ::= "\x41\u00e9\n\t")", "A\xC3\xA9\n\t"));
  EXPECT_TRUE(accepts(R"(root ::= [\U0001F600])", "\xF0\x9F\x98\x80"));
}

TEST(GrammarGbnfParser, RepetitionBounds) {
  const char* g = R"(root ::= "a"{2,3})";
  EXPECT_FALSE(accepts(g, "a"));
  EXPECT_TRUE(accepts(g, "aa"));
  EXPECT_TRUE(accepts(g, "aaa"));
  EXPECT_FALSE(accepts(g, "aaaa"));
  EXPECT_TRUE(accepts(R"(root ::= "ab"{2})", "abab"));
  EXPECT_TRUE(accepts(R"(root ::= "a"{2,} "b")", "aaaab"));
  EXPECT_FALSE(accepts(R"(root ::= "a"{2,} "b")", "ab"));
  EXPECT_TRUE(accepts(R"(root ::= "a"? "b")", "b"));
}

TEST(GrammarGbnfParser, RulesMaySpanLinesAndCarryComments) {
  const char* g = R"(# a comment
root ::= item
   ("," item)*   # more items
item ::= [0-9]+
)";
  EXPECT_TRUE(accepts(g, "1,22,333"));
  EXPECT_FALSE(accepts(g, "1,"));
}

TEST(GrammarGbnfParser, RightRecursionNestsWithoutLimitUpToTheStackBound) {
  const char* g = R"g(root ::= "(" root ")" | "x")g";
  EXPECT_TRUE(accepts(g, std::string(100, '(') + "x" + std::string(100, ')')));
  EXPECT_FALSE(accepts(g, std::string(100, '(') + "x" + std::string(99, ')')));
}

TEST(GrammarGbnfParser, WritesItsByteLevelFormBack) {
  std::string text = parse_gbnf(R"(root ::= "a" [b-d]* | "")").to_gbnf();
  EXPECT_NE(text.find("root ::= [\\x61] root.star"), std::string::npos) << text;
  EXPECT_NE(text.find("[\\x62-\\x64]"), std::string::npos) << text;
}

TEST(GrammarGbnfParser, RefusesUndefinedRule) { expect_refused(R"(root ::= missing)", "'missing'"); }
TEST(GrammarGbnfParser, RefusesMissingRoot) { expect_refused(R"(start ::= "a")", "'root'"); }
TEST(GrammarGbnfParser, RefusesLeftRecursion) {
  expect_refused("root ::= list\nlist ::= list \",\" \"a\" | \"a\"", "'list' is left-recursive");
  expect_refused("root ::= e? root \"x\" | \"y\"\ne ::= \"z\"", "left-recursive");
}
TEST(GrammarGbnfParser, RefusesDuplicateRule) { expect_refused("root ::= \"a\"\nroot ::= \"b\"", "defined twice"); }
TEST(GrammarGbnfParser, RefusesSyntaxErrorsNamingLineAndColumn) {
  expect_refused("root ::= \"a\"\nx ::= \"unterminated", "line 2");
  expect_refused("root ::= [a-", "unterminated character class");
  expect_refused("root ::= \"a\" )", "unexpected character ')'");
  expect_refused("root = \"a\"", "expected '::='");
  expect_refused("root ::= \"\\q\"", "unknown escape");
  expect_refused("root ::= [z-a]", "backwards");
  expect_refused("root ::= \"a\"{3,2}", "max below min");
  expect_refused("root ::= \"a\"{99999}", "repetition count above");
  expect_refused("root ::= (((\"a\"", "expected ')'");
}
TEST(GrammarGbnfParser, RefusesDeepNesting) {
  expect_refused("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')'), "nested deeper");
}

}  // namespace
}  // namespace flashq::grammar
