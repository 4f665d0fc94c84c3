// Harmony messages into deltas by channel and recipient, byte by byte.
#include "gateway/output/harmony_parser.h"

#include <array>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "gateway/output/held_text.h"

namespace flashq::gateway {
namespace {

constexpr std::string_view kStartTag = "<|start|>";
constexpr std::string_view kChannelTag = "<|channel|>";
constexpr std::string_view kMessageTag = "<|message|>";
constexpr std::string_view kRecipient = " to=";
constexpr std::string_view kFunctions = "functions.";
constexpr std::string_view kRole = "assistant";
// What may begin the output: its first message's header (the prompt wrote `<|start|>assistant`).
constexpr std::array<std::string_view, 3> kHeaderOpenings = {kChannelTag, kRecipient, kStartTag};
// What ends a message's body.
constexpr std::array<std::string_view, 3> kEndTags = {"<|end|>", "<|return|>", "<|call|>"};

template <std::size_t N>
bool any_equals(const std::array<std::string_view, N>& tags, std::string_view text) {
  for (std::string_view tag : tags) {
    if (tag == text) return true;
  }
  return false;
}

template <std::size_t N>
bool any_starts_with(const std::array<std::string_view, N>& tags, std::string_view text) {
  for (std::string_view tag : tags) {
    if (tag.starts_with(text)) return true;
  }
  return false;
}

// The word after position `at`: up to a space, the next tag, or the end.
std::string_view word_at(std::string_view text, std::size_t at) {
  std::string_view rest = text.substr(at);
  std::size_t end = 0;
  while (end < rest.size() && rest[end] != ' ' && rest[end] != '<') ++end;
  return rest.substr(0, end);
}

struct Header {
  bool well_formed = false;
  std::string_view channel;
  std::string_view recipient;  // empty without ` to=`
};

// `header` as written, `<|message|>` included; `<|start|>` and the role only after the first
// message.
Header read_header(std::string_view header) {
  Header out;
  header.remove_suffix(kMessageTag.size());
  if (header.starts_with(kStartTag)) {
    header.remove_prefix(kStartTag.size());
    if (!header.starts_with(kRole)) return out;
    header.remove_prefix(kRole.size());
  }
  const std::size_t channel = header.find(kChannelTag);
  if (channel == std::string_view::npos) return out;
  out.channel = word_at(header, channel + kChannelTag.size());
  if (out.channel.empty()) return out;
  const std::size_t recipient = header.find(kRecipient);
  if (recipient != std::string_view::npos) {
    out.recipient = word_at(header, recipient + kRecipient.size());
    if (out.recipient.empty()) return out;
  }
  out.well_formed = true;
  return out;
}

std::string_view trimmed(std::string_view text) {
  text = after_layout_space(text);
  while (!text.empty() && is_layout_space(text.back())) text.remove_suffix(1);
  return text;
}

// A call's arguments from its body: the JSON object as written, or the object a JSON string holds
// (how the chat template renders arguments given as a string); nullopt for anything else.
std::optional<std::string> call_arguments(std::string_view body) {
  body = trimmed(body);
  const nlohmann::json value = nlohmann::json::parse(body, nullptr, false);
  if (value.is_object()) return std::string(body);
  if (!value.is_string()) return std::nullopt;
  const std::string& held = value.get_ref<const std::string&>();
  if (!nlohmann::json::parse(held, nullptr, false).is_object()) return std::nullopt;
  return held;
}

}  // namespace

HarmonyParser::HarmonyParser(bool parse_tool_calls, bool parse_reasoning, ArgumentStreaming mode,
                             ToolCallIdGenerator make_id)
    : parse_tool_calls_(parse_tool_calls),
      parse_reasoning_(parse_reasoning),
      mode_(mode),
      make_id_(std::move(make_id)) {}

OutputDeltas HarmonyParser::feed(std::string_view text) {
  OutputDeltas out;
  for (char c : text) read_byte(c, out);
  return out;
}

void HarmonyParser::read_byte(char c, OutputDeltas& out) {
  switch (state_) {
    case State::kStart: return read_start_byte(c, out);
    case State::kHeader: return read_header_byte(c, out);
    case State::kBody: return read_body_byte(c, out);
    case State::kBetween: return read_between_byte(c, out);
  }
}

void HarmonyParser::read_start_byte(char c, OutputDeltas& out) {
  held_ += c;
  if (any_equals(kHeaderOpenings, held_)) {
    header_ = std::exchange(held_, std::string());
    state_ = State::kHeader;
    return;
  }
  if (any_starts_with(kHeaderOpenings, held_)) return;
  fall_back_to_content(out);
}

void HarmonyParser::read_between_byte(char c, OutputDeltas& out) {
  held_ += c;
  if (held_ == kStartTag) {
    header_ = std::exchange(held_, std::string());
    state_ = State::kHeader;
    return;
  }
  if (kStartTag.starts_with(held_)) return;
  fall_back_to_content(out);
}

void HarmonyParser::fall_back_to_content(OutputDeltas& out) {
  state_ = State::kBody;
  body_ = Body::kContent;
  const std::string text = std::exchange(held_, std::string());
  for (char c : text) read_body_byte(c, out);
}

void HarmonyParser::read_header_byte(char c, OutputDeltas& out) {
  header_ += c;
  if (header_.ends_with(kMessageTag)) {
    open_message(out);
    return;
  }
  if (header_.size() > kMaxHeaderBytes) {
    // Not a header: what was held is content, and so is what follows until a well-formed message.
    append_text(out, DeltaKind::kContent, header_);
    header_.clear();
    state_ = State::kBody;
    body_ = Body::kContent;
  }
}

void HarmonyParser::open_message(OutputDeltas& out) {
  const Header header = read_header(header_);
  state_ = State::kBody;
  if (!header.well_formed) {
    body_ = Body::kAsWritten;
  } else if (!header.recipient.empty()) {
    const bool function = header.recipient.starts_with(kFunctions) && header.recipient.size() > kFunctions.size();
    body_ = function && parse_tool_calls_ ? Body::kToolCall : Body::kAsWritten;
  } else if (header.channel == "analysis") {
    body_ = parse_reasoning_ ? Body::kReasoning : Body::kAsWritten;
  } else if (header.channel == "final" || header.channel == "commentary") {
    body_ = Body::kContent;
  } else {
    body_ = Body::kAsWritten;
  }
  if (body_ == Body::kAsWritten) append_text(out, DeltaKind::kContent, header_);
  if (body_ == Body::kToolCall) {
    call_name_ = std::string(header.recipient.substr(kFunctions.size()));
    call_text_ = header_;
    arguments_.clear();
    streamed_ = 0;
    body_start_ = 0;
    if (mode_ == ArgumentStreaming::kIncremental) send_tool_call_start(out);
  }
  header_.clear();
}

void HarmonyParser::read_body_byte(char c, OutputDeltas& out) {
  held_ += c;
  if (any_equals(kEndTags, held_)) {
    const std::string tag = std::exchange(held_, std::string());
    close_message(tag, out);
    return;
  }
  if (any_starts_with(kEndTags, held_)) return;
  if (held_.size() == 1) {
    send_body(std::exchange(held_, std::string()), out);
    return;
  }
  // A partial tag broken by this byte: what was held is body text, and the byte may begin a tag.
  held_.pop_back();
  send_body(std::exchange(held_, std::string()), out);
  read_body_byte(c, out);
}

void HarmonyParser::send_body(std::string_view text, OutputDeltas& out) {
  switch (body_) {
    case Body::kContent:
    case Body::kAsWritten: append_text(out, DeltaKind::kContent, text); return;
    case Body::kReasoning: append_text(out, DeltaKind::kReasoning, text); return;
    case Body::kToolCall: {
      arguments_ += text;
      if (mode_ != ArgumentStreaming::kIncremental) return;
      // Arguments written as a string are sent decoded, so whole at the end; leading whitespace
      // waits to see which they are.
      if (streamed_ == 0) {
        while (body_start_ < arguments_.size() && is_layout_space(arguments_[body_start_])) ++body_start_;
        if (body_start_ == arguments_.size() || arguments_[body_start_] == '"') return;
      }
      append_text(out, DeltaKind::kToolCallArguments, std::string_view(arguments_).substr(streamed_), next_index_);
      streamed_ = arguments_.size();
      return;
    }
  }
}

void HarmonyParser::send_tool_call_start(OutputDeltas& out) {
  OutputDelta start;
  start.kind = DeltaKind::kToolCallStart;
  start.index = next_index_;
  start.id = make_id_(next_index_);
  start.name = call_name_;
  out.push_back(std::move(start));
}

void HarmonyParser::close_message(std::string_view end_tag, OutputDeltas& out) {
  state_ = State::kBetween;
  if (body_ == Body::kAsWritten) {
    append_text(out, DeltaKind::kContent, end_tag);
    return;
  }
  if (body_ != Body::kToolCall) return;
  const std::optional<std::string> arguments = call_arguments(arguments_);
  if (mode_ == ArgumentStreaming::kValidated) {
    if (!arguments) {
      // Not a call: the message is content, exactly as written.
      append_text(out, DeltaKind::kContent, call_text_ + arguments_ + std::string(end_tag));
      return;
    }
    send_tool_call_start(out);
    append_text(out, DeltaKind::kToolCallArguments, *arguments, next_index_);
  } else if (streamed_ == 0) {
    // Nothing of the body was sent yet (a string, or only whitespace): the decoded arguments, or
    // the body as written.
    append_text(out, DeltaKind::kToolCallArguments, arguments ? *arguments : arguments_, next_index_);
  }
  // Incremental: the start and the arguments are sent; a call whose body is not one JSON object
  // ends without kToolCallEnd, and its index stays taken.
  if (arguments) {
    OutputDelta end;
    end.kind = DeltaKind::kToolCallEnd;
    end.index = next_index_;
    out.push_back(std::move(end));
  }
  ++next_index_;
}

OutputDeltas HarmonyParser::finish() {
  OutputDeltas out;
  switch (state_) {
    case State::kStart:
    case State::kBetween:
      append_text(out, DeltaKind::kContent, held_);  // a tag cut short by the end is text
      break;
    case State::kHeader:
      append_text(out, DeltaKind::kContent, header_);
      break;
    case State::kBody:
      // The end of the output ends the message (`<|return|>` and `<|call|>` are end-of-sequence
      // tokens, not sent); a tag cut short is body text.
      send_body(held_, out);
      close_message("", out);
      break;
  }
  held_.clear();
  header_.clear();
  state_ = State::kBetween;
  return out;
}

}  // namespace flashq::gateway
