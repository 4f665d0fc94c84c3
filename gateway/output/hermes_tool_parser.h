// Tool calls as Qwen3 (Qwen2.5, Hermes and the models trained on their templates) writes them:
//
//   Let me check both.
//   <tool_call>
//   {"name": "get_weather", "arguments": {"location": "Paris"}}
//   </tool_call>
//   <tool_call>
//   {"name": "get_weather", "arguments": {"location": "Rome", "days": 2}}
//   </tool_call>
//
// Text outside the blocks is content. The inverse of the template's rendering: whitespace just
// before a <tool_call> and between or after calls is the template's layout, not content, and is
// dropped. A block whose object is complete is a call even when </tool_call> never comes (the
// stream was stopped there); anything else inside a block that is not a well-formed call object
// makes the block content, exactly as written (with ArgumentStreaming::kIncremental, the part
// after a call's start was sent stays that call's; tool_call_reader.h).
#pragma once

#include "gateway/output/held_text.h"
#include "gateway/output/output_parser.h"
#include "gateway/output/tool_call_reader.h"

namespace flashq::gateway {

class HermesToolParser final : public OutputParser {
 public:
  HermesToolParser(ArgumentStreaming mode, ToolCallIdGenerator make_id);

  OutputDeltas feed(std::string_view text) override;
  OutputDeltas finish() override;

 private:
  enum class State { kContent, kInCall, kAfterCall };

  void read_byte(char c, OutputDeltas& out);
  void read_content_byte(char c, OutputDeltas& out);
  void read_after_call_byte(char c, OutputDeltas& out);
  // Sends held content, less its leading whitespace when it directly follows a call.
  void send_content(std::string_view text, OutputDeltas& out);

  State state_ = State::kContent;
  ToolCallReader reader_;
  HeldText held_;     // kContent: a whitespace run then a prefix of <tool_call>;
                      // kAfterCall: whitespace then a prefix of </tool_call>
  bool after_call_ = false;  // no content byte was sent since the last call
};

}  // namespace flashq::gateway
