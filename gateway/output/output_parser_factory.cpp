// The format of a model's output from its chat template, and the parser chain for it.
#include "gateway/output/output_parser_factory.h"

#include <string>

#include "gateway/output/hermes_tool_parser.h"
#include "gateway/output/llama3_json_tool_parser.h"
#include "gateway/output/plain_output_parser.h"
#include "gateway/output/think_tag_parser.h"

namespace flashq::gateway {

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
  }
  return "unknown";
}

std::string_view reasoning_format_name(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kThinkTags: return "think_tags";
  }
  return "unknown";
}

OutputFormat detect_output_format(std::string_view model_type, std::string_view chat_template) {
  auto mentions = [&](std::string_view s) { return chat_template.find(s) != std::string_view::npos; };
  OutputFormat format;
  const bool harmony = mentions("<|channel|>");
  if (mentions("<tool_call>")) {
    format.tool_calls = mentions("<function=") ? ToolCallFormat::kNone : ToolCallFormat::kHermes;
  } else if (!harmony && (model_type == "llama" || mentions("<|python_tag|>"))) {
    format.tool_calls = ToolCallFormat::kLlama3Json;
  }
  if (!harmony && mentions("<think>")) format.reasoning = ReasoningFormat::kThinkTags;
  return format;
}

bool prompt_opens_reasoning(std::string_view rendered_prompt) {
  while (!rendered_prompt.empty() &&
         (rendered_prompt.back() == '\n' || rendered_prompt.back() == ' ')) {
    rendered_prompt.remove_suffix(1);
  }
  return rendered_prompt.ends_with("<think>");
}

ToolCallIdGenerator index_tool_call_ids(std::string_view prefix) {
  return [p = std::string(prefix)](int index) { return p + std::to_string(index); };
}

std::unique_ptr<OutputParser> make_output_parser(const OutputFormat& format,
                                                 const OutputParserOptions& options) {
  std::unique_ptr<OutputParser> parser;
  if (options.parse_tool_calls && format.tool_calls == ToolCallFormat::kHermes) {
    parser = std::make_unique<HermesToolParser>(options.argument_streaming,
                                                options.make_tool_call_id);
  } else if (options.parse_tool_calls && format.tool_calls == ToolCallFormat::kLlama3Json) {
    parser = std::make_unique<Llama3JsonToolParser>(options.argument_streaming,
                                                    options.make_tool_call_id);
  } else {
    parser = std::make_unique<PlainOutputParser>();
  }
  if (options.parse_reasoning && format.reasoning == ReasoningFormat::kThinkTags) {
    parser = std::make_unique<ThinkTagParser>(std::move(parser), options.starts_in_reasoning);
  }
  return parser;
}

}  // namespace flashq::gateway
