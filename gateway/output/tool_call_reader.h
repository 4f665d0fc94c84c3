// Reads one JSON tool call (json_call_scanner.h) out of the stream and turns it into deltas, for
// every format that writes its calls as that object (Hermes, Llama 3.x). It owns what the two
// ArgumentStreaming modes differ in: when the call's start is sent, and what is held back so that
// a call that turns out malformed can still be given back as content, byte for byte. It also
// numbers the calls of one completion and names them with the caller's id generator.
#pragma once

#include <string>
#include <string_view>

#include "gateway/output/json_call_scanner.h"
#include "gateway/output/output_parser.h"

namespace flashq::gateway {

class ToolCallReader {
 public:
  enum class Outcome {
    kReading,   // the call goes on
    kComplete,  // the call was well formed and is sent, through its kToolCallEnd
    kFailed,    // not a (complete) call: take_unsent() is content; see byte_consumed()
  };

  ToolCallReader(ArgumentStreaming mode, ToolCallIdGenerator make_id);

  // Starts reading a call; `opening` is the format's text before the object (e.g. "<tool_call>"),
  // given back as content if the call fails before anything of it was sent.
  void begin(std::string_view opening);
  Outcome push(char c, OutputDeltas& out);
  // The stream ended inside the call: kComplete never; kFailed with the held text to give back.
  Outcome finish();

  // After kFailed: the held-back text that is content. The failing byte is not part of it unless
  // byte_consumed() (it was already sent as an argument); otherwise the caller reads it again.
  std::string take_unsent();
  bool byte_consumed() const { return byte_consumed_; }

  int calls_sent() const { return next_index_; }

 private:
  void send_start(OutputDeltas& out);
  Outcome fail(bool byte_consumed);

  ArgumentStreaming mode_;
  ToolCallIdGenerator make_id_;
  JsonCallScanner scanner_;
  std::string held_;    // raw text of this call not sent as part of it
  bool started_ = false;  // the kToolCallStart of this call was sent
  bool byte_consumed_ = false;
  int next_index_ = 0;
};

}  // namespace flashq::gateway
