// Qwen3's reasoning, `<think>\n...\n</think>\n\n` in front of the answer, split off as kReasoning
// in front of another parser, which reads the rest (the content, with its tool calls).
//
// Three cases, as Qwen3's templates render the generation prompt:
//   - thinking on (Qwen3's template with enable_thinking unset or true): the model writes
//     <think> itself as the first thing of its output;
//   - the template opened <think> in the prompt (Qwen3 Thinking-2507 and others): the output
//     starts inside the reasoning (starts_in_reasoning; prompt_opens_reasoning() in
//     output_parser_factory.h tells it from the rendered prompt);
//   - enable_thinking=false: the template wrote an empty <think>\n\n</think>\n\n into the prompt
//     and the output has none: it does not begin with <think>, so all of it is content.
// The inverse of the template's own rendering of reasoning_content: the newlines just inside the
// tags and those after </think> are layout and dropped. <think> is read only at the start of the
// output; a <think> later on, and a reasoning that never closes (cut by max_tokens), stay as
// written (the latter as reasoning).
#pragma once

#include <memory>

#include "gateway/output/held_text.h"
#include "gateway/output/output_parser.h"

namespace flashq::gateway {

class ThinkTagParser final : public OutputParser {
 public:
  ThinkTagParser(std::unique_ptr<OutputParser> content_parser, bool starts_in_reasoning);

  OutputDeltas feed(std::string_view text) override;
  OutputDeltas finish() override;

 private:
  enum class State { kOpening, kReasoning, kContent };

  // Appends to `content` what goes on to the content parser.
  void read_opening_byte(char c, std::string& content);
  void read_reasoning_byte(char c, OutputDeltas& out);

  std::unique_ptr<OutputParser> content_parser_;
  State state_;
  HeldText held_{"\n"};  // kOpening: a prefix of <think>; kReasoning: newlines, then a prefix of </think>
  bool reasoning_sent_ = false;  // a reasoning byte was sent: later newlines are text
  bool content_started_ = false;  // a content byte was passed on: later newlines are text
};

}  // namespace flashq::gateway
