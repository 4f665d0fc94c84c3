// SentencePiece .model files: a model trained here with Debian's spm_train (byte fallback on),
// loaded through load_tokenizer, must round-trip text and stream exactly what decode returns.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>

#include "shared/error.h"
#include "tests/tokenizer/scratch_dir.h"
#include "worker/text/incremental_decoder.h"
#include "worker/text/tokenizer.h"

namespace flashq {
namespace {

const std::vector<std::string> kRoundTripTexts = {
    "hello world",
    "The queue hands each job to exactly one worker.",
    "  leading spaces and trailing  ",
    "multiple   spaces\tand\ttabs\nand\nnew lines\r\n",
    "numbers 0123456789 and 3.14159",
    "unknown characters: 中文 한국어 😀👩‍💻 ∑∫",
    "characters split over byte pieces: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "punctuation!?;:'\"()[]{}<>/\\|@#$%^&*~`",
    "mixed 中 and a",
    "",
    " ",
    "a",
};

std::string training_corpus() {
  const char* words[] = {"the", "queue", "worker", "job", "token", "model", "hello", "world",
                         "stream", "decode", "encode", "broker", "fast", "small", "text"};
  std::string corpus;
  unsigned state = 12345;
  for (int line = 0; line < 400; ++line) {
    for (int w = 0; w < 8; ++w) {
      state = state * 1103515245u + 12345u;
      corpus += words[(state >> 16) % std::size(words)];
      corpus += w == 7 ? ".\n" : " ";
    }
  }
  corpus += "Numbers 0 1 2 3 4 5 6 7 8 9 and punctuation , . ! ?\n";
  return corpus;
}

class SentencePieceTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::ScratchDir();
    std::filesystem::path corpus = dir_->path() / "corpus.txt";
    std::ofstream(corpus) << training_corpus();
    std::string command = "spm_train --input=" + corpus.string() + " --model_prefix=" +
                          (dir_->path() / "tokenizer").string() +
                          " --vocab_size=320 --model_type=bpe --byte_fallback=true"
                          " --character_coverage=1.0 --normalization_rule_name=identity"
                          " --remove_extra_whitespaces=false > " +
                          (dir_->path() / "spm_train.log").string() + " 2>&1";
    train_status_ = std::system(command.c_str());
    if (train_status_ == 0) tokenizer_ = load_tokenizer(dir_->path()).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_EQ(train_status_, 0) << "spm_train failed (it comes with Debian's sentencepiece "
                                   "package, installed by scripts/setup); see "
                                << (dir_->path() / "spm_train.log").string();
    ASSERT_NE(tokenizer_, nullptr);
  }

  static test::ScratchDir* dir_;
  static int train_status_;
  static const Tokenizer* tokenizer_;
};

test::ScratchDir* SentencePieceTokenizerTest::dir_ = nullptr;
int SentencePieceTokenizerTest::train_status_ = -1;
const Tokenizer* SentencePieceTokenizerTest::tokenizer_ = nullptr;

TEST_F(SentencePieceTokenizerTest, RoundTripsTextIncludingCharactersOutsideTheVocabulary) {
  for (const std::string& text : kRoundTripTexts) {
    std::vector<int32_t> ids = tokenizer_->encode(text);
    EXPECT_EQ(tokenizer_->decode(ids), text) << "ids: " << ids.size();
  }
}

TEST_F(SentencePieceTokenizerTest, EncodesUnknownCharactersAsBytePieces) {
  std::vector<int32_t> ids = tokenizer_->encode("한");  // U+D55C = ED 95 9C
  auto byte_piece = [&](const char* piece) { return tokenizer_->token_to_id(piece).value_or(-1); };
  std::vector<int32_t> expected_tail = {byte_piece("<0xED>"), byte_piece("<0x95>"),
                                        byte_piece("<0x9C>")};
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 3, ids.end()), expected_tail);
}

TEST_F(SentencePieceTokenizerTest, StreamsOneTokenAtATimeExactlyAsDecodeDoes) {
  for (const std::string& text : kRoundTripTexts) {
    std::vector<int32_t> ids = tokenizer_->encode(text);
    std::string whole = tokenizer_->decode(ids);
    IncrementalDecoder decoder(*tokenizer_);
    std::string streamed;
    for (int32_t id : ids) {
      streamed += decoder.push(std::span<const int32_t>(&id, 1));
      EXPECT_TRUE(whole.starts_with(streamed)) << "stream " << streamed << " vs " << whole;
    }
    streamed += decoder.flush();
    EXPECT_EQ(streamed, whole);
  }
}

TEST_F(SentencePieceTokenizerTest, TreatsControlPiecesAsSpecialTokens) {
  std::optional<int32_t> eos = tokenizer_->token_to_id("</s>");
  ASSERT_TRUE(eos.has_value());
  EXPECT_TRUE(tokenizer_->is_special(*eos));
  std::vector<int32_t> ids = tokenizer_->encode("hello</s>world");
  EXPECT_NE(std::find(ids.begin(), ids.end(), *eos), ids.end());
  EXPECT_EQ(tokenizer_->decode(ids, false), "hello</s>world");
  EXPECT_EQ(tokenizer_->decode(ids, true), "hello world");
  EXPECT_EQ(tokenizer_->token_to_id("no such piece"), std::nullopt);
}

// What a grammar sees of each token: the space mark as a space, byte pieces as their byte,
// nothing for control pieces; the text's own bytes, after the leading space SentencePiece adds.
TEST_F(SentencePieceTokenizerTest, TokenBytesAreTheBytesEachPieceStandsFor) {
  EXPECT_EQ(tokenizer_->token_bytes(*tokenizer_->token_to_id("<0xED>")), "\xED");
  EXPECT_EQ(tokenizer_->token_bytes(*tokenizer_->token_to_id("</s>")), "");
  EXPECT_EQ(tokenizer_->token_bytes(tokenizer_->vocab_size()), "");
  for (const std::string& text : {std::string("hello world"), std::string("mixed 한 and a")}) {
    std::string bytes;
    for (int32_t id : tokenizer_->encode(text)) bytes += tokenizer_->token_bytes(id);
    EXPECT_EQ(bytes, " " + text);
  }
}

TEST_F(SentencePieceTokenizerTest, RefusesIdsOutsideTheVocabulary) {
  std::vector<int32_t> ids{tokenizer_->vocab_size()};
  try {
    tokenizer_->decode(ids);
    ADD_FAILURE() << "decoded an id past the vocabulary";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(SentencePieceModelFile, ReportsAFileThatIsNotAModel) {
  test::ScratchDir dir;
  std::ofstream(dir.path() / "tokenizer.model") << "not a protobuf";
  try {
    load_tokenizer(dir.path());
    ADD_FAILURE() << "loaded a broken .model";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadTokenizer);
    EXPECT_NE(std::string(e.what()).find("tokenizer.model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashq
