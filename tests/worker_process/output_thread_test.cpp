// The worker's output thread (output_thread.h): the engine's token ids become TOKENS with their
// text in order, a stop string ends the output there (the engine is told to stop the sequence, and
// ids it computed past the stop string are neither sent nor counted), and each FINAL gets this
// attempt's count and the reason the text decided.
#include "worker/process/output_thread.h"

#include <gtest/gtest.h>

#include <thread>
#include <variant>

#include "shared/protocol/messages.h"
#include "tests/support/tiny_tokenizer_suite.h"
#include "worker/process/attempt_text.h"

namespace flashq::testing {
namespace {

class OutputThreadTest : public TinyTokenizerSuite {
 protected:
  std::shared_ptr<AttemptText> attempt(const std::string& id, std::vector<std::string> stop = {}) const {
    protocol::Assign assign;
    assign.job.id = id;
    assign.job.stop = std::move(stop);
    return std::make_shared<AttemptText>(*tokenizer_, assign, /*link=*/3);
  }

  static AttemptFinal final_of(const std::shared_ptr<AttemptText>& text, protocol::FinishReason reason,
                               int64_t earlier_tokens = 0) {
    AttemptFinal final{.text = text, .link = 3, .final = {.id = text->job_id, .attempt = 1}};
    final.final.result.finish_reason = reason;
    final.final.result.usage.completion_tokens = earlier_tokens;
    if (reason == protocol::FinishReason::kCancelled) final.final.result.error = "cancelled by the client";
    return final;
  }

  // Runs the thread over `items` (EngineStopped added); what reached the outbox and the engine.
  struct Written {
    std::vector<protocol::Tokens> tokens;
    std::vector<protocol::Final> finals;
    std::vector<uint64_t> stopped_sequences;
    bool drained = false;
  };
  static Written run(std::vector<OutputItem> items) {
    OutputInbox from_engine;
    WorkInbox to_engine;
    MessageOutbox outbox;
    OutputThread output(from_engine, to_engine, outbox);
    std::thread thread([&] { output.run(); });
    for (OutputItem& item : items) from_engine.push(std::move(item));
    from_engine.push(EngineStopped{});
    thread.join();
    Written out;
    for (OutgoingMessage& message : outbox.take()) {
      EXPECT_EQ(message.link, 3u);
      if (message.message.type == protocol::MessageType::kTokens) {
        out.tokens.push_back(protocol::from_wire<protocol::Tokens>(message.message));
      } else {
        out.finals.push_back(protocol::from_wire<protocol::Final>(message.message));
      }
    }
    for (WorkItem& item : to_engine.take(/*wait=*/false)) out.stopped_sequences.push_back(std::get<StopSequence>(item).engine_id);
    out.drained = outbox.drained();
    return out;
  }

  std::vector<int32_t> ids(const std::string& text) const { return tokenizer_->encode(text); }
};

TEST_F(OutputThreadTest, StepsBecomeTokensWithTheirTextInOrderAndTheFinalCountsThem) {
  auto a = attempt("a");
  std::vector<OutputItem> items;
  items.emplace_back(AttemptTokens{.text = a, .engine_id = 1, .token_ids = ids("hello")});
  items.emplace_back(AttemptTokens{.text = a, .engine_id = 1, .token_ids = ids(" world"), .last = true});
  items.emplace_back(final_of(a, protocol::FinishReason::kLength, /*earlier_tokens=*/5));
  items.emplace_back(DrainFinished{});
  const Written w = run(std::move(items));
  ASSERT_EQ(w.tokens.size(), 2u);
  EXPECT_EQ(w.tokens[0].seq, 0);
  EXPECT_EQ(w.tokens[1].seq, 1);
  EXPECT_EQ(w.tokens[0].text + w.tokens[1].text, "hello world");
  ASSERT_EQ(w.finals.size(), 1u);
  EXPECT_EQ(w.finals[0].result.finish_reason, protocol::FinishReason::kLength);
  const auto sent = static_cast<int64_t>(w.tokens[0].token_ids.size() + w.tokens[1].token_ids.size());
  EXPECT_EQ(w.finals[0].result.usage.completion_tokens, 5 + sent);
  EXPECT_TRUE(w.stopped_sequences.empty());
  EXPECT_TRUE(w.drained);
}

TEST_F(OutputThreadTest, AStopStringEndsTheOutputStopsTheSequenceAndDiscardsWhatCameAfter) {
  auto a = attempt("a", {"STOP"});
  std::vector<OutputItem> items;
  items.emplace_back(AttemptTokens{.text = a, .engine_id = 7, .token_ids = ids("one STOP two")});
  items.emplace_back(AttemptTokens{.text = a, .engine_id = 7, .token_ids = ids(" three")});  // computed past it
  items.emplace_back(AttemptTokens{.text = a, .engine_id = 7, .last = true});
  items.emplace_back(final_of(a, protocol::FinishReason::kCancelled));  // a cancel that came after
  const Written w = run(std::move(items));
  ASSERT_EQ(w.tokens.size(), 1u);
  EXPECT_EQ(w.tokens[0].text, "one ");
  EXPECT_EQ(w.stopped_sequences, std::vector<uint64_t>{7});
  ASSERT_EQ(w.finals.size(), 1u);
  EXPECT_EQ(w.finals[0].result.finish_reason, protocol::FinishReason::kStop);
  EXPECT_FALSE(w.finals[0].result.error);
  EXPECT_EQ(w.finals[0].result.usage.completion_tokens, static_cast<int64_t>(w.tokens[0].token_ids.size()));
  EXPECT_LT(w.tokens[0].token_ids.size(), ids("one STOP two").size()) << "ids after the stop string are cut";
}

// Log-probabilities as the engine gives them for each id (a made-up row: id, then its candidates).
std::vector<TokenLogprobs> logprobs_for(const std::vector<int32_t>& token_ids) {
  std::vector<TokenLogprobs> out;
  for (size_t i = 0; i < token_ids.size(); ++i) {
    const float logprob = -0.5f * static_cast<float>(i + 1);
    out.push_back({logprob, {{token_ids[i], logprob}, {static_cast<int32_t>(i), logprob - 1.0f}}});
  }
  return out;
}

TEST_F(OutputThreadTest, LogprobsGoWithTheKeptIdsEachWithItsBytes) {
  auto a = attempt("a", {"STOP"});
  const std::vector<int32_t> first = ids("one STOP two");
  std::vector<OutputItem> items;
  items.emplace_back(AttemptTokens{.text = a, .engine_id = 7, .token_ids = first, .logprobs = logprobs_for(first)});
  items.emplace_back(final_of(a, protocol::FinishReason::kLength));
  const Written w = run(std::move(items));
  ASSERT_EQ(w.tokens.size(), 1u);
  const protocol::Tokens& tokens = w.tokens[0];
  ASSERT_LT(tokens.token_ids.size(), first.size());
  ASSERT_EQ(tokens.logprobs.size(), tokens.token_ids.size()) << "cut with the ids past the stop string";
  std::string spelled;
  for (size_t i = 0; i < tokens.token_ids.size(); ++i) {
    const protocol::OutputLogprobs& token = tokens.logprobs[i];
    EXPECT_EQ(token.chosen.token, tokens.token_ids[i]);
    EXPECT_FLOAT_EQ(static_cast<float>(token.chosen.logprob), -0.5f * static_cast<float>(i + 1));
    EXPECT_EQ(token.chosen.bytes, tokenizer_->token_bytes(tokens.token_ids[i]));
    ASSERT_EQ(token.top.size(), 2u);
    EXPECT_EQ(token.top[1].token, static_cast<int32_t>(i));
    EXPECT_EQ(token.top[1].bytes, tokenizer_->token_bytes(static_cast<int32_t>(i)));
    spelled += token.chosen.bytes;
  }
  EXPECT_EQ(spelled.substr(0, tokens.text.size()), tokens.text);

  auto b = attempt("b");
  std::vector<OutputItem> plain;
  plain.emplace_back(AttemptTokens{.text = b, .engine_id = 8, .token_ids = ids("hello"), .last = true});
  EXPECT_TRUE(run(std::move(plain)).tokens.at(0).logprobs.empty()) << "none unless the job asked";
}

TEST_F(OutputThreadTest, ATailCompletingAStopStringMakesLengthAStopButACancelStaysACancel) {
  // The output ends on half a character: the end releases it as U+FFFD, which completes the stop
  // string "x\uFFFD" only then.
  const std::vector<int32_t> e_acute = ids("\xC3\xA9");
  ASSERT_EQ(e_acute.size(), 2u) << "one id per byte in the tiny tokenizer";
  for (const auto reason : {protocol::FinishReason::kLength, protocol::FinishReason::kCancelled}) {
    auto a = attempt("a", {"x\xEF\xBF\xBD"});
    std::vector<OutputItem> items;
    items.emplace_back(AttemptTokens{.text = a, .engine_id = 1, .token_ids = ids("wx")});
    items.emplace_back(AttemptTokens{.text = a, .engine_id = 1, .token_ids = {e_acute[0]}, .last = true});
    items.emplace_back(final_of(a, reason));
    const Written w = run(std::move(items));
    ASSERT_EQ(w.finals.size(), 1u);
    const auto want = reason == protocol::FinishReason::kLength ? protocol::FinishReason::kStop : reason;
    EXPECT_EQ(w.finals[0].result.finish_reason, want);
    std::string text;
    for (const protocol::Tokens& t : w.tokens) text += t.text;
    EXPECT_EQ(text, "w") << "the stop string is never sent";
    EXPECT_TRUE(w.stopped_sequences.empty()) << "the sequence had ended already";
  }
}

TEST_F(OutputThreadTest, AStepWhoseTokensWereAllCutStillReportsItsDraftAndARefusalPassesAsItIs) {
  auto a = attempt("a");
  AttemptTokens eos_first{.text = a, .engine_id = 1, .last = true};
  eos_first.spec.emplace();
  eos_first.spec->add_draft(4, 0);
  std::vector<OutputItem> items;
  items.emplace_back(std::move(eos_first));
  items.emplace_back(final_of(a, protocol::FinishReason::kStop));
  AttemptFinal refused{.link = 3, .final = {.id = "b", .attempt = 1}};
  refused.final.result = {.finish_reason = protocol::FinishReason::kRejected, .error = "prompt too long"};
  items.emplace_back(refused);
  const Written w = run(std::move(items));
  ASSERT_EQ(w.tokens.size(), 1u);
  EXPECT_TRUE(w.tokens[0].token_ids.empty());
  ASSERT_TRUE(w.tokens[0].spec);
  ASSERT_EQ(w.finals.size(), 2u);
  EXPECT_EQ(w.finals[1].result, refused.final.result);
}

}  // namespace
}  // namespace flashq::testing
