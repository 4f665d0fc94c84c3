// Wire names of the output formats, both ways.
#include "shared/protocol/output_format.h"

#include <array>
#include <optional>

#include "shared/error.h"
#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"

namespace flashq::protocol {
namespace {

constexpr std::array kToolCallFormats = {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
                                         ToolCallFormat::kHarmony};
constexpr std::array kReasoningFormats = {ReasoningFormat::kNone, ReasoningFormat::kThinkTags,
                                          ReasoningFormat::kThinkInPrompt, ReasoningFormat::kHarmony};

// One name per format, by overload, for the templates below.
std::string_view wire_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kHarmony: return "harmony";
  }
  return "unknown";
}

std::string_view wire_name(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kThinkTags: return "think";
    case ReasoningFormat::kThinkInPrompt: return "think_in_prompt";
    case ReasoningFormat::kHarmony: return "harmony";
  }
  return "unknown";
}

template <typename Format, std::size_t N>
std::optional<Format> find_by_name(const std::array<Format, N>& formats, std::string_view name) {
  for (Format format : formats) {
    if (name == wire_name(format)) return format;
  }
  return std::nullopt;
}

template <typename Format, std::size_t N>
std::string joined_names(const std::array<Format, N>& formats) {
  std::string out;
  for (Format format : formats) out += (out.empty() ? "" : ", ") + std::string(wire_name(format));
  return out;
}

// `name` as the peer sent it, cut short and with control bytes replaced, for an error message.
std::string shown(std::string_view name) {
  constexpr std::size_t kShown = 64;
  std::string out;
  for (char c : name.substr(0, kShown)) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte < 0x20 || byte == 0x7F ? '?' : c;
  }
  if (name.size() > kShown) out += "...";
  return out;
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat format) { return wire_name(format); }
std::string_view reasoning_format_name(ReasoningFormat format) { return wire_name(format); }

std::string tool_call_format_names() { return joined_names(kToolCallFormats); }
std::string reasoning_format_names() { return joined_names(kReasoningFormats); }

ToolCallFormat tool_call_format_from_name(std::string_view name) {
  if (const std::optional<ToolCallFormat> format = find_by_name(kToolCallFormats, name)) return *format;
  throw Error(ErrorCode::kProtocol,
              "unknown tool call format '" + shown(name) + "' (known: " + tool_call_format_names() + ")");
}

ReasoningFormat reasoning_format_from_name(std::string_view name) {
  if (const std::optional<ReasoningFormat> format = find_by_name(kReasoningFormats, name)) return *format;
  throw Error(ErrorCode::kProtocol,
              "unknown reasoning format '" + shown(name) + "' (known: " + reasoning_format_names() + ")");
}

ToolCallFormat read_tool_call_format(const FieldReader& fields, std::string_view key) {
  const std::optional<std::string> name = fields.optional_string(key, {1, kMaxCodeBytes});
  if (!name) return ToolCallFormat::kNone;
  if (const std::optional<ToolCallFormat> format = find_by_name(kToolCallFormats, *name)) return *format;
  fields.fail(key, "must be one of " + tool_call_format_names() + ", got '" + shown(*name) + "'");
}

ReasoningFormat read_reasoning_format(const FieldReader& fields, std::string_view key) {
  const std::optional<std::string> name = fields.optional_string(key, {1, kMaxCodeBytes});
  if (!name) return ReasoningFormat::kNone;
  if (const std::optional<ReasoningFormat> format = find_by_name(kReasoningFormats, *name)) return *format;
  fields.fail(key, "must be one of " + reasoning_format_names() + ", got '" + shown(*name) + "'");
}

}  // namespace flashq::protocol
