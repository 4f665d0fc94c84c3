// The sender's side of strict decoding (docs/protocol.md 4): a debug build decodes every body it
// encodes and aborts, naming the message and the field, when its own decoder refuses it. (A
// release build sends without the check; these tests run in the suite's debug builds, under the
// sanitizers.)
#include <gtest/gtest.h>

#include "shared/protocol/wire.h"

namespace flashq::protocol {
namespace {

#ifdef NDEBUG
constexpr bool kChecksEncoding = false;
#else
constexpr bool kChecksEncoding = true;
#endif

FinalResult negative_queue_time() {
  FinalResult result;
  result.finish_reason = FinishReason::kStop;
  result.timings.queue_ms = -1364368;  // what a figure counted from the steady clock's zero looks like
  return result;
}

TEST(EncodeCheck, AMessageItsOwnDecoderRefusesIsNeverSent) {
  if (!kChecksEncoding) GTEST_SKIP() << "release build: bodies are sent unchecked";
  StatusReply reply{.id = "j1", .state = JobState::kFinished, .final_result = negative_queue_time()};
  EXPECT_DEATH((void)to_wire(reply), "refused by its own decoder.*queue_ms");
  EXPECT_DEATH((void)to_wire(Tokens{.id = "j1", .seq = -1}), "TOKENS refused by its own decoder.*seq");
}

TEST(EncodeCheck, AFinalMapItsOwnDecoderRefusesIsNeverWritten) {
  if (!kChecksEncoding) GTEST_SKIP() << "release build: final maps are written unchecked";
  EXPECT_DEATH((void)encode_final_result(negative_queue_time()), "final map refused by its own decoder.*queue_ms");
  FinalResult error_without_text;
  error_without_text.finish_reason = FinishReason::kError;
  error_without_text.error = "";
  EXPECT_DEATH((void)encode_final_result(error_without_text), "final map refused by its own decoder.*error");
}

TEST(EncodeCheck, WhatTheDecoderAcceptsIsSentUnchanged) {
  FinalResult fine;
  fine.finish_reason = FinishReason::kLength;
  fine.timings = {.queue_ms = 0, .ttft_ms = 5, .total_ms = 9};
  const WireMessage wire = to_wire(StatusReply{.id = "j1", .state = JobState::kFinished, .final_result = fine});
  EXPECT_EQ(from_wire<StatusReply>(wire).final_result, fine);
}

}  // namespace
}  // namespace flashq::protocol
