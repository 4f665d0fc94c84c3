// <think> ... </think> at the start of the output, incrementally.
#include "gateway/output/think_tag_parser.h"

#include <utility>

namespace flashq::gateway {
namespace {

constexpr std::string_view kOpenTag = "<think>";
constexpr std::string_view kCloseTag = "</think>";

std::string_view after_newlines(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && text[i] == '\n') ++i;
  return text.substr(i);
}

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
  held_ += c;
  if (held_ == kOpenTag) {
    held_.clear();
    state_ = State::kReasoning;
    return;
  }
  if (kOpenTag.starts_with(held_)) return;
  // No reasoning in this output: all of it is content, as written.
  state_ = State::kContent;
  content_started_ = true;
  content += std::exchange(held_, std::string());
}

void ThinkTagParser::read_reasoning_byte(char c, OutputDeltas& out) {
  if (!reasoning_sent_ && held_.empty() && c == '\n') return;  // the newline after <think>
  held_ += c;
  const std::string_view tail = after_newlines(held_);
  if (tail == kCloseTag) {
    held_.clear();  // with the newlines before </think>
    state_ = State::kContent;
    return;
  }
  if (kCloseTag.starts_with(tail)) return;
  std::string text = std::exchange(held_, std::string());
  if (tail.size() > 1) {
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
    append_deltas(out, content_parser_->feed(held_));
  } else if (state_ == State::kReasoning && !after_newlines(held_).empty()) {
    append_text(out, DeltaKind::kReasoning, held_);  // a </think> cut short is text
  }
  held_.clear();
  state_ = State::kContent;
  append_deltas(out, content_parser_->finish());
  return out;
}

}  // namespace flashq::gateway
