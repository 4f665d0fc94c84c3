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
#include "worker/grammar/tool_call_grammar.h"

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

// Walks `text` token by token under `compiled`; at every step compares masks, and every few steps
// detours through a random allowed token and back (a rolled-back draft). Ends where the grammar
// may end.
void check_masks_along(const Tokenizer& tokenizer, const TokenTable& tokens,
                       std::shared_ptr<const CompiledGrammar> compiled, const std::string& text, int detour_every,
                       const std::string& what) {
  GrammarMatcher matcher(std::move(compiled));
  std::vector<int32_t> ids = tokenizer.encode(text);
  std::mt19937 rng(11);
  for (size_t i = 0; i <= ids.size(); ++i) {
    std::vector<int32_t> expected = testing::brute_force_allowed(matcher, tokens);
    ASSERT_EQ(testing::mask_allowed(matcher, tokens), expected) << what << " at token " << i;
    if (i % detour_every == 1 && !expected.empty()) {
      int32_t detour = expected[rng() % expected.size()];
      ASSERT_TRUE(matcher.accept_token(detour));
      std::vector<int32_t> after = testing::brute_force_allowed(matcher, tokens);
      ASSERT_EQ(testing::mask_allowed(matcher, tokens), after) << what << " after detour token " << detour << " at " << i;
      matcher.rollback(1);
    }
    if (i == ids.size()) break;
    ASSERT_TRUE(matcher.accept_token(ids[i])) << what << ": token " << i << " refused";
  }
  EXPECT_TRUE(matcher.can_end()) << what;
  ASSERT_FALSE(tokens.end_token_ids().empty());
  EXPECT_TRUE(matcher.accept_token(tokens.end_token_ids()[0])) << what;
}

void check_masks_along_instance(const std::filesystem::path& dir, int detour_every) {
  std::unique_ptr<Tokenizer> tokenizer = load_or_fail(dir);
  if (!tokenizer) return;
  auto tokens = std::make_shared<const TokenTable>(*tokenizer, end_ids(*tokenizer));
  check_masks_along(*tokenizer, *tokens, compile_grammar({GrammarFormat::kJsonSchema, kNestedSchema, {}}, tokens),
                    kInstance, detour_every, dir.string());
}

TEST(GrammarRealTokenizer, Qwen3MasksEqualBruteForce) { check_masks_along_instance(test::qwen3_tokenizer_dir(), 3); }
TEST(GrammarRealTokenizer, Llama31MasksEqualBruteForce) { check_masks_along_instance(test::llama3_1_tokenizer_dir(), 7); }
TEST(GrammarRealTokenizer, GptOssMasksEqualBruteForce) { check_masks_along_instance(test::gptoss_tokenizer_dir(), 7); }

// Strict tools' grammars over the real vocabularies, along the calls each family writes: Qwen3's
// lazy Hermes grammar through free text and its trigger (the <tool_call> token), Llama 3's, and
// gpt-oss's harmony call after its analysis message, its special tokens spelled (kAsText).
void check_tool_call_masks(const std::filesystem::path& dir, ToolCallSyntax syntax, ToolCallChoice choice,
                           SpecialTokens special, const std::string& text) {
  std::unique_ptr<Tokenizer> tokenizer = load_or_fail(dir);
  if (!tokenizer) return;
  auto tokens = std::make_shared<const TokenTable>(*tokenizer, end_ids(*tokenizer), 0, special);
  const ToolCallRequest request{
      .syntax = syntax,
      .choice = choice,
      .tools = {{.name = "get_weather", .parameters_json = R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false})"}},
      .reasoning = ReasoningStart::kOptional};
  check_masks_along(*tokenizer, *tokens, compile_grammar({GrammarFormat::kGbnf, tool_call_grammar(request), {}}, tokens),
                    text, 3, dir.string());
}

TEST(GrammarRealTokenizer, Qwen3LazyToolCallMasksEqualBruteForce) {
  check_tool_call_masks(test::qwen3_tokenizer_dir(), ToolCallSyntax::kHermes, ToolCallChoice::kAuto,
                        SpecialTokens::kNeverAllowed,
                        "<think>\nParis, then.\n</think>\n\nLet me look: <tool_call>\n{\"name\": \"get_weather\", "
                        "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
}

TEST(GrammarRealTokenizer, Llama31LazyToolCallMasksEqualBruteForce) {
  check_tool_call_masks(test::llama3_1_tokenizer_dir(), ToolCallSyntax::kLlama3Json, ToolCallChoice::kAuto,
                        SpecialTokens::kNeverAllowed, R"({"name": "get_weather", "parameters": {"city": "Paris"}})");
}

TEST(GrammarRealTokenizer, GptOssHarmonyToolCallMasksEqualBruteForce) {
  check_tool_call_masks(test::gptoss_tokenizer_dir(), ToolCallSyntax::kHarmony, ToolCallChoice::kRequired,
                        SpecialTokens::kAsText,
                        "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>commentary "
                        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}");
}

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
