// gpt-oss's output in the harmony format, read by channel, incrementally. After the generation
// prompt `<|start|>assistant` the model writes one or more messages:
//
//   <|channel|>analysis<|message|>The user wants the weather. Call get_weather.<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Paris"}<|call|>
//
// or, for an answer, `...<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>`.
// A message is a header (`<|start|>` role, then `<|channel|>NAME` and an optional recipient
// ` to=functions.NAME`, which may come before the channel as well as after it, and an optional
// content type such as ` json` or `<|constrain|>json`), `<|message|>`, the body, and `<|end|>`,
// `<|return|>` or `<|call|>`. The first message's `<|start|>assistant` is the prompt's, so the
// output begins at its channel. The text needs the special tokens, which the worker's
// detokenizer keeps (docs/protocol.md, TOKENS); `<|return|>` and `<|call|>` are end-of-sequence
// tokens the worker does not send, so the end of the output closes the last message.
//
// Bodies become deltas by header:
//   channel analysis, no recipient       kReasoning
//   channel final or commentary          kContent (commentary without a recipient is a preamble
//                                        meant for the user)
//   recipient functions.NAME             a tool call: kToolCallStart (NAME), the body as its
//                                        arguments, kToolCallEnd when the body is one JSON object
//                                        (or a JSON string holding one, as the template renders
//                                        string arguments: sent decoded); ArgumentStreaming as for
//                                        the other formats
//   anything else                        content, exactly as written, header and tags included
//                                        (another recipient such as `browser.search`, a tool call
//                                        when the request has no tools, an unknown channel, an
//                                        over-long or broken header, text between messages)
// An output that does not begin with a header (a template whose generation prompt already
// opened `<|channel|>final<|message|>`) begins inside a final message. Nothing here fails the
// stream: the worst case is content that shows the harmony tokens.
#pragma once

#include <cstddef>
#include <string>

#include "gateway/output/output_parser.h"

namespace flashq::gateway {

class HarmonyParser final : public OutputParser {
 public:
  // `parse_tool_calls`: false when the request has no tools (or tool_choice "none"): messages to
  // functions are content as written. `parse_reasoning`: false keeps analysis messages as written.
  HarmonyParser(bool parse_tool_calls, bool parse_reasoning, ArgumentStreaming mode,
                ToolCallIdGenerator make_id);

  OutputDeltas feed(std::string_view text) override;
  OutputDeltas finish() override;

  // A header longer than this is not one: it is given back as content rather than held.
  static constexpr std::size_t kMaxHeaderBytes = 512;

 private:
  enum class State {
    kStart,    // the output's first bytes: a header, or the body of a message the prompt opened
    kHeader,   // between `<|start|>` (or the output's start) and `<|message|>`
    kBody,     // a message's body
    kBetween,  // after a message's end tag: the next `<|start|>` is awaited
  };
  enum class Body { kContent, kReasoning, kToolCall, kAsWritten };

  void read_byte(char c, OutputDeltas& out);
  void read_start_byte(char c, OutputDeltas& out);
  void read_header_byte(char c, OutputDeltas& out);
  void read_body_byte(char c, OutputDeltas& out);
  void read_between_byte(char c, OutputDeltas& out);
  // The held bytes were not a tag: they are read again as the body of a final message.
  void fall_back_to_content(OutputDeltas& out);
  void open_message(OutputDeltas& out);
  void send_body(std::string_view text, OutputDeltas& out);
  // `end_tag` as written ("" when the output ended the message).
  void close_message(std::string_view end_tag, OutputDeltas& out);
  void send_tool_call_start(OutputDeltas& out);

  bool parse_tool_calls_;
  bool parse_reasoning_;
  ArgumentStreaming mode_;
  ToolCallIdGenerator make_id_;

  State state_ = State::kStart;
  Body body_ = Body::kContent;
  std::string held_;       // a prefix of a tag that may be coming
  std::string header_;     // kHeader: the header as written so far
  std::string call_name_;  // kToolCall: the function's name
  std::string call_text_;  // kToolCall: the header as written, then the body (validated mode)
  std::string arguments_;  // kToolCall: the body so far
  std::size_t streamed_ = 0;    // kToolCall, incremental: bytes of arguments_ sent
  std::size_t body_start_ = 0;  // kToolCall: the leading whitespace of arguments_ seen so far
  int next_index_ = 0;
};

}  // namespace flashq::gateway
