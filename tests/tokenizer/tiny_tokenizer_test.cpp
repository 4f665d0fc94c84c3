#include "tools/flashq_model/tiny_tokenizer.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tests/tokenizer/scratch_dir.h"
#include "worker/text/bpe_tokenizer.h"
#include "worker/text/incremental_decoder.h"
#include "worker/text/tokenizer.h"

namespace flashq {
namespace {

const std::vector<std::string> kTexts = {
    "The queue hands each job to one worker.",
    "def generate(model, prompt):\n    return model(prompt)\n",
    "中文和日本語のテキスト, 한국어, русский, العربية",
    "emoji 👩‍💻👍🏽 and   spaces\t\ttabs\r\n",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
    "numbers 1234567890 3.14159",
};

TEST(TinyTokenizer, KeepsTheVocabularyWithinMaxVocabWithSpecialTokensLast) {
  for (int32_t max_vocab : {300, 512, 4096}) {
    test::ScratchDir dir;
    TinyTokenizerIds ids = write_tiny_tokenizer(dir.path(), max_vocab);
    auto tokenizer = load_tokenizer(dir.path());
    EXPECT_LE(tokenizer->vocab_size(), max_vocab);
    EXPECT_EQ(ids.im_end, tokenizer->vocab_size() - 1);
    EXPECT_EQ(tokenizer->token_to_id("<|endoftext|>"), ids.endoftext);
    EXPECT_EQ(tokenizer->token_to_id("<|im_start|>"), ids.im_start);
    EXPECT_EQ(tokenizer->token_to_id("<|im_end|>"), ids.im_end);
    EXPECT_TRUE(tokenizer->is_special(ids.im_end));
    EXPECT_FALSE(tokenizer->is_special(ids.endoftext - 1));
  }
}

TEST(TinyTokenizer, FillsTheRoomWithMergesLearnedFromItsText) {
  test::ScratchDir dir;
  TinyTokenizerIds ids = write_tiny_tokenizer(dir.path(), 400);
  EXPECT_EQ(ids.im_end, 399);
  auto tokenizer = load_tokenizer(dir.path());
  std::string text = "the queue and the worker";
  EXPECT_LT(tokenizer->encode(text).size(), text.size() / 2);
}

TEST(TinyTokenizer, RoundTripsTextAndStreamsItAsDecodeDoes) {
  test::ScratchDir dir;
  write_tiny_tokenizer(dir.path(), 1000);
  auto tokenizer = load_tokenizer(dir.path());
  for (const std::string& text : kTexts) {
    std::vector<int32_t> ids = tokenizer->encode(text);
    EXPECT_EQ(tokenizer->decode(ids), text);
    IncrementalDecoder decoder(*tokenizer);
    std::string streamed;
    for (int32_t id : ids) streamed += decoder.push(std::span<const int32_t>(&id, 1));
    streamed += decoder.flush();
    EXPECT_EQ(streamed, text);
  }
}

TEST(TinyTokenizer, WritesAQwenStyleTokenizerConfig) {
  test::ScratchDir dir;
  write_tiny_tokenizer(dir.path(), 300);
  nlohmann::json config = read_json_file(dir.path() / "tokenizer_config.json");
  EXPECT_EQ(config["eos_token"], "<|im_end|>");
  EXPECT_EQ(config["tokenizer_class"], "Qwen2Tokenizer");
  EXPECT_TRUE(config["chat_template"].is_string());
  nlohmann::json tokenizer = read_json_file(dir.path() / "tokenizer.json");
  EXPECT_EQ(tokenizer["normalizer"]["type"], "NFC");
  EXPECT_EQ(tokenizer["decoder"]["type"], "ByteLevel");
}

TEST(TinyTokenizer, WritesTheSameFilesEveryTime) {
  test::ScratchDir first;
  test::ScratchDir second;
  write_tiny_tokenizer(first.path() / "a", 777);
  write_tiny_tokenizer(second.path() / "b", 777);
  EXPECT_EQ(read_text_file(first.path() / "a/tokenizer.json"),
            read_text_file(second.path() / "b/tokenizer.json"));
}

TEST(TinyTokenizer, RefusesAVocabularyBelow300) {
  test::ScratchDir dir;
  try {
    write_tiny_tokenizer(dir.path(), 299);
    ADD_FAILURE() << "accepted max_vocab 299";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

// A TemplateProcessing post-processor's special tokens go before and after the text, and only
// when special tokens are asked for; a ByteLevel step beside it adds nothing.
TEST(TinyTokenizer, AddsTheTemplatesSpecialTokensAroundTheText) {
  test::ScratchDir dir;
  TinyTokenizerIds ids = write_tiny_tokenizer(dir.path(), 320);
  std::filesystem::path file = dir.path() / "tokenizer.json";
  nlohmann::json spec = nlohmann::json::parse(read_text_file(file));
  auto special = [](const char* name, int32_t id) {
    return nlohmann::json{{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  };
  spec["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}},
        {{"type", "TemplateProcessing"},
         {"single",
          {{{"SpecialToken", {{"id", "<|im_start|>"}, {"type_id", 0}}}},
           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
           {{"SpecialToken", {{"id", "<|im_end|>"}, {"type_id", 0}}}}}},
         {"special_tokens",
          {{"<|im_start|>", special("<|im_start|>", ids.im_start)},
           {"<|im_end|>", special("<|im_end|>", ids.im_end)}}}}}}};
  write_text_file(file, spec.dump());
  auto tokenizer = ByteLevelBpeTokenizer::load(file);
  std::vector<int32_t> plain = tokenizer->encode("hello queue");
  std::vector<int32_t> expected{ids.im_start};
  expected.insert(expected.end(), plain.begin(), plain.end());
  expected.push_back(ids.im_end);
  EXPECT_EQ(tokenizer->encode_with_special_tokens("hello queue"), expected);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), ids.im_start), 0);
}

}  // namespace
}  // namespace flashq
