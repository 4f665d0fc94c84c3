// <think> ... </think> at the start of the output, incrementally.
#include "gateway/output/think_tag_parser.h"

#include <utility>

namespace flashq::gateway {
namespace {

constexpr std::string_view kOpenTag = "<think>";
constexpr std::string_view kCloseTag = "</think>";

}  // namespace

ThinkTagParser::ThinkTagParser(std::unique_ptr<OutputParser> content_parser,
                               bool starts_in_reasoning)
    : content_parser_(std::move(content_parser)),
      state_(starts_in_reasoning ? State::kReasoning : State::kOpening) {}

OutputDeltas ThinkTagParser::feed(std::string_view text) {
  OutputDeltas out;
  std::string content;  // handed to the content parser in one piece, after the reasoning before it
  for (char c : text) {
    switch (state_) {
      case State::kOpening: read_opening_byte(c, content); break;
      case State::kReasoning: read_reasoning_byte(c, out); break;
      case State::kContent:
        if (!content_started_ && c == '\n') break;  // the blank line after </think>
        content_started_ = true;
        content += c;
        break;
    }
  }
  if (!content.empty()) append_deltas(out, content_parser_->feed(content));
  return out;
}

void ThinkTagParser::read_opening_byte(char c, std::string& content) {
  held_.push(c);
  if (held_.text() == kOpenTag) {
    held_.clear();
    state_ = State::kReasoning;
    return;
  }
  if (kOpenTag.starts_with(held_.text())) return;
  // No reasoning in this output: all of it is content, as written.
  state_ = State::kContent;
  content_started_ = true;
  content += held_.take();
}

void ThinkTagParser::read_reasoning_byte(char c, OutputDeltas& out) {
  if (!reasoning_sent_ && held_.empty() && c == '\n') return;  // the newline after <think>
  held_.push(c);
  const std::string_view tail = held_.tail();
  if (tail == kCloseTag) {
    held_.clear();  // with the newlines before </think>
    state_ = State::kContent;
    return;
  }
  if (kCloseTag.starts_with(tail)) return;
  const bool broken_tag = tail.size() > 1;
  std::string text = held_.take();
  if (broken_tag) {
    // A partial tag broken by this byte: the byte may begin the tag again.
    text.pop_back();
    append_text(out, DeltaKind::kReasoning, text);
    reasoning_sent_ = true;
    read_reasoning_byte(c, out);
    return;
  }
  append_text(out, DeltaKind::kReasoning, text);
  reasoning_sent_ = true;
}

OutputDeltas ThinkTagParser::finish() {
  OutputDeltas out;
  if (state_ == State::kOpening && !held_.empty()) {
    append_deltas(out, content_parser_->feed(held_.text()));
  } else if (state_ == State::kReasoning && !held_.tail().empty()) {
    append_text(out, DeltaKind::kReasoning, held_.text());  // a </think> cut short is text
  }
  held_.clear();
  state_ = State::kContent;
  append_deltas(out, content_parser_->finish());
  return out;
}

}  // namespace flashq::gateway
