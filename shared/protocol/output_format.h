// The vocabulary of a model's output formats, as READY and MODELS_REPLY carry them
// (docs/protocol.md, "Output formats"): how the model writes tool calls and reasoning, which is
// how the gateway must read its output. The worker learns them from its checkpoint's chat
// template (shared/output_format_detection.h); the gateway picks its parsers by them
// (gateway/output/output_parser_factory.h).
//
// Wire names:
//   tool_call_format: "none" (no parser knows the format), "hermes" (<tool_call>{json}</tool_call>,
//     Qwen2.5/Qwen3/Hermes), "llama3_json" (Llama 3.x's bare JSON call, or <|python_tag|>),
//     "harmony" (gpt-oss: a commentary message addressed `to=functions.NAME`);
//   reasoning_format: "none", "think" (the model may write <think>...</think>), "think_in_prompt"
//     (as "think", and the template's generation prompt already opens <think>, so the output
//     starts inside the reasoning unless a request turns thinking off), "harmony" (gpt-oss: the
//     analysis channel). A harmony model has "harmony" in both: one parser reads its channels,
//     its reasoning and its tool calls (gateway/output/harmony_parser.h).
#pragma once

#include <string>
#include <string_view>

namespace flashq::protocol {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json, kHarmony };
enum class ReasoningFormat { kNone, kThinkTags, kThinkInPrompt, kHarmony };

std::string_view tool_call_format_name(ToolCallFormat format);
std::string_view reasoning_format_name(ReasoningFormat format);

// The format with this wire name; kProtocol naming the name and those known for any other.
ToolCallFormat tool_call_format_from_name(std::string_view name);
ReasoningFormat reasoning_format_from_name(std::string_view name);

// "none, hermes, llama3_json, harmony" and "none, think, think_in_prompt, harmony": for error
// messages.
std::string tool_call_format_names();
std::string reasoning_format_names();

class FieldReader;

// The optional field `key` of a message being decoded ("none" when absent); an unknown name is a
// kProtocol error naming the message, the field and the names known.
ToolCallFormat read_tool_call_format(const FieldReader& fields, std::string_view key);
ReasoningFormat read_reasoning_format(const FieldReader& fields, std::string_view key);

struct OutputFormat {
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool operator==(const OutputFormat&) const = default;
};

}  // namespace flashq::protocol
