// Llama 3.x JSON tool calls, incrementally.
#include "gateway/output/llama3_json_tool_parser.h"

#include <utility>

namespace flashq::gateway {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view after_spaces(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  return text.substr(i);
}

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
      if (is_space(c)) return;
      if (c == ';') {
        state_ = State::kBeforeCall;
        return;
      }
      if (c == '{') {
        begin_call(out);
        return read_byte(c, out);
      }
      state_ = State::kContent;
      return append_text(out, DeltaKind::kContent, std::string_view(&c, 1));
  }
}

void Llama3JsonToolParser::begin_call(OutputDeltas&) {
  // Whitespace after a ';' is layout; before the first call it is the message's own text, given
  // back if the call fails.
  reader_.begin(reader_.calls_sent() > 0 ? after_spaces(held_) : std::string_view(held_));
  held_.clear();
  state_ = State::kInCall;
}

void Llama3JsonToolParser::read_before_call_byte(char c, OutputDeltas& out) {
  if (c == '{') {
    const std::string_view tail = after_spaces(held_);
    const bool tag_done = tail.starts_with(kPythonTag);
    if (tail.empty() || (tag_done && after_spaces(tail.substr(kPythonTag.size())).empty())) {
      begin_call(out);
      read_byte(c, out);
      return;
    }
  }
  held_ += c;
  std::string_view tail = after_spaces(held_);
  if (tail.empty()) return;
  if (tail.size() <= kPythonTag.size() && kPythonTag.starts_with(tail)) return;
  if (tail.starts_with(kPythonTag) && after_spaces(tail.substr(kPythonTag.size())).empty()) return;
  // Not a call: the message is content, from its first byte. Between calls, the whitespace
  // after the ';' is layout.
  state_ = State::kContent;
  const bool after_call = reader_.calls_sent() > 0;
  append_text(out, DeltaKind::kContent, after_call ? after_spaces(held_) : std::string_view(held_));
  held_.clear();
}

OutputDeltas Llama3JsonToolParser::finish() {
  OutputDeltas out;
  switch (state_) {
    case State::kBeforeCall:
      // Whitespace alone after a ';' is layout; otherwise what was held is the message's text.
      if (reader_.calls_sent() == 0 || !after_spaces(held_).empty()) {
        append_text(out, DeltaKind::kContent,
                    reader_.calls_sent() > 0 ? after_spaces(held_) : std::string_view(held_));
      }
      break;
    case State::kInCall:
      reader_.finish(out);
      append_text(out, DeltaKind::kContent, reader_.take_unsent());
      break;
    case State::kAfterCall:
    case State::kContent:
      break;
  }
  held_.clear();
  state_ = State::kContent;
  return out;
}

}  // namespace flashq::gateway
