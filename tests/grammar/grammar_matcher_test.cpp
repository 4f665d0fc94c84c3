// The matcher: accepting, rolling back, ending, and masks equal to trying every token.
#include <gtest/gtest.h>

#include <random>

#include "shared/error.h"
#include "tests/grammar/grammar_test_support.h"

namespace flashq::grammar {
namespace {

using testing::brute_force_allowed;
using testing::compile;
using testing::mask_allowed;

// Multi-byte tokens over a small alphabet: every string of length 1 to 3 over `alphabet`, then
// an end token.
std::shared_ptr<const TokenTable> small_vocabulary(const std::string& alphabet) {
  std::vector<std::string> bytes;
  for (char a : alphabet) {
    bytes.emplace_back(1, a);
    for (char b : alphabet) {
      bytes.push_back(std::string{a, b});
      for (char c : alphabet) bytes.push_back(std::string{a, b, c});
    }
  }
  bytes.emplace_back();  // the end token
  int32_t end = static_cast<int32_t>(bytes.size() - 1);
  return std::make_shared<const TokenTable>(std::move(bytes), std::vector<int32_t>{end});
}

TEST(GrammarMatcher, RefusedTokenLeavesStateUnchanged) {
  auto tokens = small_vocabulary("ab");
  GrammarMatcher m(compile(R"(root ::= "ab" "a")", tokens));
  EXPECT_FALSE(m.accept_bytes("b"));
  EXPECT_TRUE(m.accept_bytes("ab"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("a"));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarMatcher, RollbackRestoresEarlierStates) {
  auto tokens = small_vocabulary("ab");
  GrammarMatcher m(compile(R"(root ::= "a"+ "b")", tokens));
  ASSERT_TRUE(m.accept_bytes("aa"));
  ASSERT_TRUE(m.accept_bytes("ab"));
  EXPECT_TRUE(m.can_end());
  m.rollback(1);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("b"));
  m.rollback(2);
  EXPECT_EQ(m.accepted_steps(), 0u);
  EXPECT_FALSE(m.accept_bytes("b"));
}

TEST(GrammarMatcher, RollbackPastTheStartIsRefused) {
  GrammarMatcher m(compile(R"(root ::= "a")", small_vocabulary("a")));
  try {
    m.rollback(1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(GrammarMatcher, EndTokenOnlyWhereTheGrammarEnds) {
  auto tokens = small_vocabulary("ab");
  int32_t end = tokens->end_token_ids()[0];
  GrammarMatcher m(compile(R"(root ::= "a" "b"?)", tokens));
  EXPECT_FALSE(m.accept_token(end));
  ASSERT_TRUE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_token(end));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_bytes("b"));
  m.rollback(1);
  EXPECT_TRUE(m.accept_bytes("b"));
}

TEST(GrammarMatcher, ForcedTokenWhenOnlyOneIsAllowed) {
  std::vector<std::string> bytes{"{", "\"", "{\"", "a", ""};
  auto tokens = std::make_shared<const TokenTable>(bytes, std::vector<int32_t>{4});
  GrammarMatcher m(compile(R"(root ::= "{" "a")", tokens));
  EXPECT_EQ(m.forced_token(), 0);
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_EQ(m.forced_token(), 3);
  ASSERT_TRUE(m.accept_token(3));
  EXPECT_EQ(m.forced_token(), 4);  // only the end token
}

TEST(GrammarMatcher, DraftMasksAreTheMasksAfterEachAcceptedPrefix) {
  auto tokens = small_vocabulary("ab");
  auto compiled = compile(R"(root ::= "a" "b"+ "a")", tokens);
  GrammarMatcher m(compiled);
  const size_t words = tokens->mask_words();
  auto id = [&](const std::string& bytes) {
    for (int32_t i = 0; i < tokens->vocab_size(); ++i) {
      if (tokens->bytes(i) == bytes) return i;
    }
    return -1;
  };
  std::vector<int32_t> draft{id("ab"), id("b"), id("aa"), id("b")};  // "aa" is refused
  std::vector<uint32_t> masks((draft.size() + 1) * words);
  EXPECT_EQ(m.fill_draft_masks(draft, masks), 2u);
  EXPECT_EQ(m.accepted_steps(), 0u);
  GrammarMatcher step(compiled);
  for (size_t i = 0; i <= 2; ++i) {
    std::vector<uint32_t> expected(words);
    step.fill_mask(expected);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), masks.begin() + static_cast<long>(i * words))) << i;
    if (i < 2) {
      ASSERT_TRUE(step.accept_token(draft[i]));
    }
  }
  std::vector<uint32_t> too_small(words);
  EXPECT_THROW(m.fill_draft_masks(draft, too_small), Error);
}

TEST(GrammarMatcher, OutOfRangeAndEmptyTokensAreRefused) {
  std::vector<std::string> bytes{"a", ""};
  auto tokens = std::make_shared<const TokenTable>(bytes, std::vector<int32_t>{});
  GrammarMatcher m(compile(R"(root ::= "a"*)", tokens));
  EXPECT_FALSE(m.accept_token(-1));
  EXPECT_FALSE(m.accept_token(2));
  EXPECT_FALSE(m.accept_token(1));
  std::vector<uint32_t> short_mask(0);
  EXPECT_THROW(m.fill_mask(short_mask), Error);
}

// Random walks through grammars with nesting, repetition and classes: at every step the mask
// equals the brute-force answer, and a random allowed token is taken (or a rollback made).
TEST(GrammarMatcher, MaskEqualsTryingEveryToken) {
  const char* grammars[] = {
      R"(root ::= "[" (item ("," item)*)? "]"
item ::= [0-9]+ | "\"" [a-c,\]]* "\"" | root)",
      R"(root ::= ("ab" | "a" "c"?){1,4} "b"*)",
      R"(root ::= x x
x ::= "a"? "b"? "c"?)",
  };
  auto tokens = small_vocabulary("[]0129\",abc");
  std::mt19937 rng(7);
  for (const char* g : grammars) {
    auto compiled = compile(g, tokens);
    GrammarMatcher m(compiled);
    for (int step = 0; step < 60; ++step) {
      std::vector<int32_t> expected = brute_force_allowed(m, *tokens);
      ASSERT_EQ(mask_allowed(m, *tokens), expected) << g << " after " << m.accepted_steps() << " steps";
      if (expected.empty() || m.is_terminated() || rng() % 5 == 0) {
        if (m.accepted_steps() == 0) break;
        m.rollback(1 + rng() % std::min<size_t>(3, m.accepted_steps()));
        continue;
      }
      ASSERT_TRUE(m.accept_token(expected[rng() % expected.size()]));
    }
  }
}

}  // namespace
}  // namespace flashq::grammar
