// Llama 3.x JSON tool calls, incrementally.
#include "gateway/output/llama3_json_tool_parser.h"

#include <utility>

namespace flashq::gateway {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

}  // namespace

Llama3JsonToolParser::Llama3JsonToolParser(ArgumentStreaming mode, ToolCallIdGenerator make_id)
    : reader_(mode, std::move(make_id)) {}

OutputDeltas Llama3JsonToolParser::feed(std::string_view text) {
  OutputDeltas out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (state_ == State::kContent) {
      append_text(out, DeltaKind::kContent, text.substr(i));
      break;
    }
    read_byte(text[i], out);
  }
  return out;
}

void Llama3JsonToolParser::read_byte(char c, OutputDeltas& out) {
  switch (state_) {
    case State::kBeforeCall: return read_before_call_byte(c, out);
    case State::kContent: return append_text(out, DeltaKind::kContent, std::string_view(&c, 1));
    case State::kInCall: {
      const ToolCallReader::Outcome outcome = reader_.push(c, out);
      if (outcome == ToolCallReader::Outcome::kComplete) {
        state_ = State::kAfterCall;
      } else if (outcome == ToolCallReader::Outcome::kFailed) {
        state_ = State::kContent;
        append_text(out, DeltaKind::kContent, reader_.take_unsent());
        if (!reader_.byte_consumed()) append_text(out, DeltaKind::kContent, std::string_view(&c, 1));
      }
      return;
    }
    case State::kAfterCall:
      if (is_layout_space(c)) return;
      if (c == ';') {
        state_ = State::kBeforeCall;
        return;
      }
      if (c == '{') {
        begin_call();
        return read_byte(c, out);
      }
      state_ = State::kContent;
      return append_text(out, DeltaKind::kContent, std::string_view(&c, 1));
  }
}

void Llama3JsonToolParser::begin_call() {
  // Whitespace after a ';' is layout; before the first call it is the message's own text, given
  // back if the call fails.
  reader_.begin(reader_.calls_sent() > 0 ? after_layout_space(held_.text()) : held_.text());
  held_.clear();
  tag_read_ = false;
  state_ = State::kInCall;
}

void Llama3JsonToolParser::turn_to_content(OutputDeltas& out) {
  state_ = State::kContent;
  const std::string_view held = held_.text();
  append_text(out, DeltaKind::kContent, reader_.calls_sent() > 0 ? after_layout_space(held) : held);
  held_.clear();
  tag_read_ = false;
}

void Llama3JsonToolParser::read_before_call_byte(char c, OutputDeltas& out) {
  if (c == '{' && (tag_read_ || held_.tail().empty())) {
    begin_call();
    read_byte(c, out);
    return;
  }
  held_.push(c);
  if (tag_read_) {
    if (!is_layout_space(c)) turn_to_content(out);
    return;
  }
  const std::string_view tail = held_.tail();
  if (tail == kPythonTag) {
    tag_read_ = true;
  } else if (!kPythonTag.starts_with(tail)) {
    turn_to_content(out);
  }
}

OutputDeltas Llama3JsonToolParser::finish() {
  OutputDeltas out;
  switch (state_) {
    case State::kBeforeCall:
      // Whitespace alone after a ';' is layout; otherwise what was held is the message's text.
      turn_to_content(out);
      break;
    case State::kInCall:
      reader_.finish();
      append_text(out, DeltaKind::kContent, reader_.take_unsent());
      break;
    case State::kAfterCall:
    case State::kContent:
      break;
  }
  held_.clear();
  tag_read_ = false;
  state_ = State::kContent;
  return out;
}

}  // namespace flashq::gateway
