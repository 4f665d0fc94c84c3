// Masks over real vocabularies (Qwen3, Llama 3.1, gpt-oss from scripts/setup): walking a valid
// instance token by token, and stepping off it onto other allowed tokens, fill_mask must equal
// the brute-force answer of feeding every token's bytes. Fails, naming scripts/setup, when the
// tokenizer files are missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tests/grammar/grammar_test_support.h"
#include "tests/tokenizer/qwen3_golden.h"
#include "worker/grammar/grammar_compiler.h"
#include "worker/grammar/json_schema_grammar.h"

namespace flashq::grammar {
namespace {

const char* kNestedSchema = R"({"type":"object","properties":{
  "id":{"type":"integer","minimum":0,"maximum":99999},
  "name":{"type":"string","minLength":1,"maxLength":40},
  "email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
  "active":{"type":"boolean"},
  "score":{"type":"number"},
  "role":{"enum":["admin","user","guest"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":5},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
     "zip":{"type":"string","pattern":"^\\d{5}$"}},"required":["street","city"],"additionalProperties":false},
  "manager":{"anyOf":[{"type":"null"},{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},
     "required":["id"],"additionalProperties":false}]},
  "notes":{"type":["string","null"]}},
  "required":["id","name","email","active","role","tags","address"],"additionalProperties":false})";

const char* kInstance = R"({"id": 4021, "name": "Ada \"Countess\" Lovelace", "email": "ada.l@analytical.uk", "active": true, "score": -12.5e3, "role": "admin", "tags": ["math", "poetry", "\u00e9t\u00e9"], "address": {"street": "12 St James's Sq", "city": "London", "zip": "02134"}, "manager": {"id": 7}, "notes": null})";

std::unique_ptr<Tokenizer> load_or_fail(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    ADD_FAILURE() << dir << "/tokenizer.json is missing: run scripts/setup";
    return nullptr;
  }
  return load_tokenizer(dir);
}

std::vector<int32_t> end_ids(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (const char* name : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|return|>"}) {
    if (auto id = tokenizer.token_to_id(name)) ids.push_back(*id);
  }
  return ids;
}

// Walks the instance; at every step compares masks, and every few steps detours through a
// random allowed token and back (a rolled-back draft).
void check_masks_along_instance(const std::filesystem::path& dir, int detour_every) {
  std::unique_ptr<Tokenizer> tokenizer = load_or_fail(dir);
  if (!tokenizer) return;
  auto tokens = std::make_shared<const TokenTable>(*tokenizer, end_ids(*tokenizer));
  auto compiled = compile_grammar({GrammarFormat::kJsonSchema, kNestedSchema, {}}, tokens);
  GrammarMatcher matcher(compiled);
  std::vector<int32_t> ids = tokenizer->encode(kInstance);
  std::mt19937 rng(11);
  for (size_t i = 0; i <= ids.size(); ++i) {
    std::vector<int32_t> expected = testing::brute_force_allowed(matcher, *tokens);
    ASSERT_EQ(testing::mask_allowed(matcher, *tokens), expected) << dir << " at token " << i;
    if (i % detour_every == 1 && !expected.empty()) {
      int32_t detour = expected[rng() % expected.size()];
      ASSERT_TRUE(matcher.accept_token(detour));
      std::vector<int32_t> after = testing::brute_force_allowed(matcher, *tokens);
      ASSERT_EQ(testing::mask_allowed(matcher, *tokens), after)
          << dir << " after detour token " << detour << " at " << i;
      matcher.rollback(1);
    }
    if (i == ids.size()) break;
    ASSERT_TRUE(matcher.accept_token(ids[i])) << "instance token " << i << " refused";
  }
  EXPECT_TRUE(matcher.can_end());
  ASSERT_FALSE(tokens->end_token_ids().empty());
  EXPECT_TRUE(matcher.accept_token(tokens->end_token_ids()[0]));
}

TEST(GrammarRealTokenizer, Qwen3MasksEqualBruteForce) { check_masks_along_instance(test::qwen3_tokenizer_dir(), 3); }
TEST(GrammarRealTokenizer, Llama31MasksEqualBruteForce) { check_masks_along_instance(test::llama3_1_tokenizer_dir(), 7); }
TEST(GrammarRealTokenizer, GptOssMasksEqualBruteForce) { check_masks_along_instance(test::gptoss_tokenizer_dir(), 7); }

// Qwen3's model has 151,936 logits for 151,669 tokens: the padding ids are never allowed.
TEST(GrammarRealTokenizer, PaddedLogitsAreNeverAllowed) {
  std::unique_ptr<Tokenizer> tokenizer = load_or_fail(test::qwen3_tokenizer_dir());
  if (!tokenizer) return;
  auto tokens = std::make_shared<const TokenTable>(*tokenizer, end_ids(*tokenizer), 151936);
  EXPECT_EQ(tokens->vocab_size(), 151936);
  GrammarMatcher matcher(compile_grammar({GrammarFormat::kJsonObject, "", {}}, tokens));
  ASSERT_TRUE(matcher.accept_bytes("{\"a\": \""));
  std::vector<uint32_t> mask(tokens->mask_words());
  matcher.fill_mask(mask);
  std::vector<int32_t> allowed = testing::allowed_ids(mask);
  ASSERT_FALSE(allowed.empty());
  EXPECT_LT(allowed.back(), tokenizer->vocab_size());
  EXPECT_FALSE(matcher.accept_token(151935));
}

TEST(GrammarRealTokenizer, TokenBytesAreTheDecodedBytes) {
  std::unique_ptr<Tokenizer> tokenizer = load_or_fail(test::qwen3_tokenizer_dir());
  if (!tokenizer) return;
  EXPECT_EQ(tokenizer->token_bytes(*tokenizer->token_to_id("Ġhello")), " hello");
  EXPECT_EQ(tokenizer->token_bytes(*tokenizer->token_to_id("<|im_end|>")), "");
  EXPECT_EQ(tokenizer->token_bytes(-1), "");
  EXPECT_EQ(tokenizer->token_bytes(tokenizer->vocab_size()), "");
  std::string all;
  std::vector<int32_t> ids = tokenizer->encode("héllo wörld ✓ 😀");
  for (int32_t id : ids) all += tokenizer->token_bytes(id);
  EXPECT_EQ(all, "héllo wörld ✓ 😀");
}

}  // namespace
}  // namespace flashq::grammar
