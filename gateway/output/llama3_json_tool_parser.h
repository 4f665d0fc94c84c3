// Tool calls as Llama 3.1 / 3.2 / 3.3 write them with JSON tools (their templates' "Respond in the
// format {"name": function name, "parameters": dictionary of argument name and its value}"):
//
//   {"name": "get_weather", "parameters": {"location": "Paris, France", "unit": "celsius"}}
//
// The call is the whole assistant message, optionally after <|python_tag|> (kept in the text when
// special tokens are decoded); several calls are joined by ';' (as vLLM's llama3_json parser
// reads them; Llama 3.1's template itself renders one call per message). "arguments" is read in
// place of "parameters" too. A message that does not begin with '{' (after whitespace and the
// tag) is content, sent as it comes; one that begins with '{' is held until it is known to be a
// call or not (non-call JSON such as {"answer": 4} is known at its first key). A malformed call
// and everything after it are content, exactly as written; text after the last call is content;
// the whitespace and ';' between calls are dropped.
#pragma once

#include "gateway/output/held_text.h"
#include "gateway/output/output_parser.h"
#include "gateway/output/tool_call_reader.h"

namespace flashq::gateway {

class Llama3JsonToolParser final : public OutputParser {
 public:
  Llama3JsonToolParser(ArgumentStreaming mode, ToolCallIdGenerator make_id);

  OutputDeltas feed(std::string_view text) override;
  OutputDeltas finish() override;

 private:
  enum class State {
    kBeforeCall,  // the start, or after a ';': whitespace, the tag, then '{' or content
    kInCall,
    kAfterCall,   // whitespace, then ';' or '{' for another call, or content
    kContent,     // the rest of the message is content
  };

  void read_byte(char c, OutputDeltas& out);
  void read_before_call_byte(char c, OutputDeltas& out);
  void begin_call();
  // What was held is not a call: it and the rest of the message are content.
  void turn_to_content(OutputDeltas& out);

  State state_ = State::kBeforeCall;
  ToolCallReader reader_;
  HeldText held_;  // kBeforeCall: whitespace, a (prefix of the) <|python_tag|>, whitespace
  bool tag_read_ = false;  // kBeforeCall: the whole <|python_tag|> is in held_
};

}  // namespace flashq::gateway
