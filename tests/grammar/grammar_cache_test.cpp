// The cache of compiled grammars: hits for the same request and table, misses otherwise, least
// recently used dropped first, refusals not kept.
#include <gtest/gtest.h>

#include <thread>

#include "shared/error.h"
#include "tests/grammar/grammar_test_support.h"
#include "worker/grammar/grammar_cache.h"

namespace flashq::grammar {
namespace {

GrammarRequest gbnf(const std::string& text) { return {GrammarFormat::kGbnf, text, {}}; }

TEST(GrammarCache, SameRequestAndTableIsServedFromTheCache) {
  GrammarCache cache(4);
  auto tokens = testing::byte_tokens();
  auto a = cache.get_or_compile(gbnf(R"(root ::= "a")"), tokens);
  auto b = cache.get_or_compile(gbnf(R"(root ::= "a")"), tokens);
  EXPECT_EQ(a, b);
  EXPECT_EQ(cache.hits(), 1u);
  auto other_table = testing::byte_tokens();
  EXPECT_NE(cache.get_or_compile(gbnf(R"(root ::= "a")"), other_table), a);
  EXPECT_NE(cache.get_or_compile({GrammarFormat::kRegex, R"(root ::= "a")", {}}, tokens), a);
  EXPECT_EQ(cache.misses(), 3u);
}

TEST(GrammarCache, DropsTheLeastRecentlyUsed) {
  GrammarCache cache(2);
  auto tokens = testing::byte_tokens();
  auto a = cache.get_or_compile(gbnf(R"(root ::= "a")"), tokens);
  cache.get_or_compile(gbnf(R"(root ::= "b")"), tokens);
  cache.get_or_compile(gbnf(R"(root ::= "a")"), tokens);  // a is now the most recent
  cache.get_or_compile(gbnf(R"(root ::= "c")"), tokens);  // drops b
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.get_or_compile(gbnf(R"(root ::= "a")"), tokens), a);
  size_t misses = cache.misses();
  cache.get_or_compile(gbnf(R"(root ::= "b")"), tokens);
  EXPECT_EQ(cache.misses(), misses + 1);
}

TEST(GrammarCache, ChoicesAreKeyedWithoutAmbiguity) {
  GrammarCache cache(8);
  auto tokens = testing::byte_tokens();
  auto ab = cache.get_or_compile({GrammarFormat::kChoice, "", {"a:1:b"}}, tokens);
  auto split = cache.get_or_compile({GrammarFormat::kChoice, "", {"a", "b"}}, tokens);
  EXPECT_NE(ab, split);
}

TEST(GrammarCache, RefusalsAreNotKept) {
  GrammarCache cache(2);
  auto tokens = testing::byte_tokens();
  EXPECT_THROW(cache.get_or_compile(gbnf("root ::= missing"), tokens), Error);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(GrammarCache, SharedByThreads) {
  GrammarCache cache(4);
  auto tokens = testing::byte_tokens();
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<const CompiledGrammar>> got(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto compiled = cache.get_or_compile(gbnf(R"(root ::= [a-z]+ ("," [a-z]+)*)"), tokens);
      GrammarMatcher matcher(compiled);
      std::vector<uint32_t> mask(tokens->mask_words());
      matcher.fill_mask(mask);
      got[t] = compiled;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache.size(), 1u);
  for (const auto& g : got) EXPECT_TRUE(g != nullptr);
}

}  // namespace
}  // namespace flashq::grammar

namespace flashq::grammar {
namespace {

// Compilation builds the mask cache entries of every context an ASCII instance meets, so masks
// along it build none (the engine's thread never pays for one).
TEST(GrammarPrecompute, MasksAlongAnInstanceFindTheirEntriesBuilt) {
  auto tokens = testing::byte_tokens();
  auto compiled = compile_grammar({GrammarFormat::kJsonSchema, R"({"type":"object","properties":{
      "a":{"type":"integer","minimum":1,"maximum":500},"b":{"type":"array","items":{"type":"string"}},
      "c":{"anyOf":[{"type":"null"},{"type":"boolean"}]}},"required":["a","b"]})", {}}, tokens);
  size_t built = compiled->cached_entries();
  EXPECT_GT(built, 10u);
  GrammarMatcher matcher(compiled);
  std::vector<uint32_t> mask(tokens->mask_words());
  for (char c : std::string(R"({"a": 250, "b": ["x y", "\"z\""], "c": null})")) {
    matcher.fill_mask(mask);
    ASSERT_TRUE(matcher.accept_bytes(std::string(1, c)));
  }
  EXPECT_TRUE(matcher.can_end());
  EXPECT_EQ(compiled->cached_entries(), built);
}

TEST(GrammarPrecompute, StopsAtItsBudgetAndBuildsTheRestWhenMet) {
  auto tokens = testing::byte_tokens();
  auto compiled = std::make_shared<const CompiledGrammar>(parse_gbnf(R"(root ::= [a-z]{0,200})"), tokens);
  compiled->precompute_masks(/*max_contexts=*/5, /*max_trie_walks=*/1000);
  size_t built = compiled->cached_entries();
  EXPECT_LE(built, 6u);
  GrammarMatcher matcher(compiled);
  std::vector<uint32_t> mask(tokens->mask_words());
  for (int i = 0; i < 20; ++i) {
    matcher.fill_mask(mask);
    ASSERT_TRUE(matcher.accept_bytes("q"));
  }
  EXPECT_GT(compiled->cached_entries(), built);
}

}  // namespace
}  // namespace flashq::grammar
