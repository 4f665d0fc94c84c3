// <tool_call> blocks in the content, incrementally.
#include "gateway/output/hermes_tool_parser.h"

#include <utility>

namespace flashq::gateway {
namespace {

constexpr std::string_view kOpenTag = "<tool_call>";
constexpr std::string_view kCloseTag = "</tool_call>";

}  // namespace

HermesToolParser::HermesToolParser(ArgumentStreaming mode, ToolCallIdGenerator make_id)
    : reader_(mode, std::move(make_id)) {}

OutputDeltas HermesToolParser::feed(std::string_view text) {
  OutputDeltas out;
  for (char c : text) read_byte(c, out);
  return out;
}

void HermesToolParser::send_content(std::string_view text, OutputDeltas& out) {
  if (after_call_) text = after_layout_space(text);
  if (text.empty()) return;
  append_text(out, DeltaKind::kContent, text);
  after_call_ = false;
}

void HermesToolParser::read_byte(char c, OutputDeltas& out) {
  switch (state_) {
    case State::kContent: return read_content_byte(c, out);
    case State::kAfterCall: return read_after_call_byte(c, out);
    case State::kInCall: {
      const ToolCallReader::Outcome outcome = reader_.push(c, out);
      if (outcome == ToolCallReader::Outcome::kComplete) {
        state_ = State::kAfterCall;
        held_.clear();
      } else if (outcome == ToolCallReader::Outcome::kFailed) {
        state_ = State::kContent;
        const bool consumed = reader_.byte_consumed();
        append_text(out, DeltaKind::kContent, reader_.take_unsent());
        after_call_ = false;
        if (!consumed) read_content_byte(c, out);
      }
      return;
    }
  }
}

void HermesToolParser::read_content_byte(char c, OutputDeltas& out) {
  held_.push(c);
  const std::string_view tail = held_.tail();
  if (tail == kOpenTag) {
    // The whitespace before the tag is layout; it is given back only if the call fails.
    reader_.begin(held_.text());
    held_.clear();
    state_ = State::kInCall;
    return;
  }
  if (kOpenTag.starts_with(tail)) return;  // whitespace, or a tag that may be coming
  if (tail.size() == 1) {
    send_content(held_.take(), out);
    return;
  }
  // A partial tag broken by this byte: what was held is content, and the byte may begin a tag.
  held_.pop_back();
  send_content(held_.take(), out);
  read_content_byte(c, out);
}

void HermesToolParser::read_after_call_byte(char c, OutputDeltas& out) {
  held_.push(c);
  const std::string_view tail = held_.tail();
  if (tail == kCloseTag) {
    held_.clear();
    state_ = State::kContent;
    after_call_ = true;
    return;
  }
  if (kCloseTag.starts_with(tail)) return;
  // No closing tag: the call stands and what follows is read as content.
  state_ = State::kContent;
  after_call_ = true;
  const std::string rest = held_.take();
  for (char r : rest) read_content_byte(r, out);
}

OutputDeltas HermesToolParser::finish() {
  OutputDeltas out;
  switch (state_) {
    case State::kContent:
      send_content(held_.text(), out);  // a partial tag at the very end is text
      break;
    case State::kInCall:
      reader_.finish();
      append_text(out, DeltaKind::kContent, reader_.take_unsent());
      break;
    case State::kAfterCall:
      break;  // whitespace and the start of a </tool_call> cut off by the end of generation
  }
  held_.clear();
  state_ = State::kContent;
  return out;
}

}  // namespace flashq::gateway
