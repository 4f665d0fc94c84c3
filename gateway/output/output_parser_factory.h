// Which parser reads a model's output, chosen from what the model's chat template writes, and
// the parser made for one completion.
//
// detect_output_format(model_type, chat_template) decides, in this order:
//   tool calls: a template that writes `<tool_call>` with a JSON object inside is Hermes
//     (Qwen2.5, Qwen3, Hermes, and the many templates copied from them); one that writes
//     `<tool_call>` with `<function=` inside is Qwen3-Coder's XML form, which has no parser yet
//     (kNone); a harmony template (`<|channel|>`, gpt-oss) has none yet either; a `llama`
//     model_type, or a template that writes `<|python_tag|>`, is Llama 3.x JSON; else kNone.
//   reasoning: a template that writes `<think>` (and is not harmony) is ThinkTags.
// kNone for tool calls means no parser knows the model's format: the gateway refuses a request
// with tools for it rather than answer with calls left unparsed in the content.
//
// make_output_parser() builds the chain: ThinkTagParser (when the format has reasoning and the
// request wants it split) in front of the tool-call parser (when the request has tools and its
// tool_choice is not "none"), else PlainOutputParser. Adding gpt-oss is one ToolCallFormat (or an
// OutputFormat flag), its detection line above, and a HarmonyParser (output_parser.h).
#pragma once

#include <memory>
#include <string_view>

#include "gateway/output/output_parser.h"

namespace flashq::gateway {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json };
enum class ReasoningFormat { kNone, kThinkTags };

std::string_view tool_call_format_name(ToolCallFormat format);
std::string_view reasoning_format_name(ReasoningFormat format);

struct OutputFormat {
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool operator==(const OutputFormat&) const = default;
};

// model_type from config.json; chat_template the template's source as loaded.
OutputFormat detect_output_format(std::string_view model_type, std::string_view chat_template);

// True when the rendered prompt ends inside an opened <think> (trailing whitespace aside), so
// the output starts in the reasoning.
bool prompt_opens_reasoning(std::string_view rendered_prompt);

// "call_<index>": for callers with no job id (tests, tools); the gateway names calls by job.
ToolCallIdGenerator index_tool_call_ids(std::string_view prefix = "call_");

struct OutputParserOptions {
  bool parse_tool_calls = true;      // false without tools or with tool_choice "none"
  bool parse_reasoning = true;       // false to leave <think> text in the content
  bool starts_in_reasoning = false;  // prompt_opens_reasoning(prompt)
  ArgumentStreaming argument_streaming = ArgumentStreaming::kValidated;
  ToolCallIdGenerator make_tool_call_id = index_tool_call_ids();
};

std::unique_ptr<OutputParser> make_output_parser(const OutputFormat& format,
                                                 const OutputParserOptions& options);

}  // namespace flashq::gateway
