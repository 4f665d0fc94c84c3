// Bad input of every kind is an Error, never a crash or a hang: random bytes and mutations of
// valid texts as GBNF, regex and JSON Schema, pathological grammars, and matching them.
#include <gtest/gtest.h>

#include <random>

#include "shared/error.h"
#include "tests/grammar/grammar_test_support.h"
#include "worker/grammar/json_schema_grammar.h"
#include "worker/grammar/regex_grammar.h"

namespace flashq::grammar {
namespace {

// Compiles `gbnf` and feeds it `text` byte by byte with masks; any outcome but a crash is fine.
void exercise(const std::string& gbnf, const std::string& text) {
  auto tokens = testing::byte_tokens();
  try {
    GrammarMatcher matcher(testing::compile(gbnf, tokens));
    std::vector<uint32_t> mask(tokens->mask_words());
    for (char c : text) {
      matcher.fill_mask(mask);
      if (!matcher.accept_bytes(std::string(1, c))) break;
    }
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
}

std::string mutate(std::string text, std::mt19937& rng) {
  const std::string alphabet = "\"\\[]()|*+?{},:^$-.#0129ax\n \x80\xC3\xFF";
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    size_t at = rng() % text.size();
    switch (rng() % 3) {
      case 0: text[at] = alphabet[rng() % alphabet.size()]; break;
      case 1: text.erase(at, 1 + rng() % 3); break;
      default: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
    }
  }
  return text;
}

TEST(GrammarRobustness, MutatedGbnfIsRefusedOrMatchedNeverCrashes) {
  const std::string seeds[] = {
      R"(root ::= "[" (item ("," item)*)? "]"
item ::= [0-9]+ | "\"" [^"\\]* "\"" | root)",
      R"(root ::= ("ab" | "a" "c"?){1,4} "b"* [\u00e9-\U0001F600]?)",
  };
  std::mt19937 rng(3);
  for (int i = 0; i < 400; ++i) {
    exercise(mutate(seeds[i % 2], rng), "[1,\"a\",[]]abcab");
  }
}

TEST(GrammarRobustness, MutatedRegexAndSchemasAreRefusedOrCompiled) {
  const std::string regex = R"(^(?:[a-z]+|\d{2,5})-[^\s"]*\.(x|y)$)";
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"string","pattern":"^a+$"},
    "b":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":3}},"required":["a"],
    "$defs":{"n":{"type":"integer","minimum":-3,"maximum":300}}})";
  std::mt19937 rng(4);
  for (int i = 0; i < 400; ++i) {
    try {
      exercise(regex_grammar(mutate(regex, rng)), "abc-x.y");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
    try {
      exercise(json_schema_grammar(mutate(schema, rng)), R"({"a":"aa","b":[1,22]})");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  }
}

TEST(GrammarRobustness, RandomBytesAreRefused) {
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    std::string junk(1 + rng() % 40, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    for (auto compile : {+[](const std::string& s) { parse_gbnf(s); },
                         +[](const std::string& s) { regex_grammar(s); },
                         +[](const std::string& s) { json_schema_grammar(s); }}) {
      try {
        compile(junk);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      }
    }
  }
}

TEST(GrammarRobustness, AmbiguousGrammarIsMatchedOrStoppedAtTheStackLimit) {
  // Every split of a run of a's into parts of one or two is a parse of its own.
  auto tokens = testing::byte_tokens();
  GrammarMatcher matcher(testing::compile(R"(root ::= x*
x ::= "a" | "a" "a" | "a" x x)", tokens));
  try {
    for (int i = 0; i < 200; ++i) matcher.accept_bytes("a");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos);
  }
}

TEST(GrammarRobustness, DeepNestingStopsAtTheStackBound) {
  auto tokens = testing::byte_tokens();
  GrammarMatcher matcher(testing::compile(R"(root ::= "[" root? "]")", tokens));
  int accepted = 0;
  while (accepted < 5000 && matcher.accept_bytes("[")) ++accepted;
  EXPECT_LT(accepted, 5000);
  EXPECT_GE(accepted, 1000);
}

TEST(GrammarRobustness, LongRepetitionsCompileWithinTheLimits) {
  EXPECT_TRUE(testing::accepts(R"(root ::= [a-z]{4096})", std::string(4096, 'q')));
  EXPECT_TRUE(testing::accepts(R"(root ::= ("ab" | "c"){0,4096})", "abcab"));
}

}  // namespace
}  // namespace flashq::grammar
