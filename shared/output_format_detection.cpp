// The output formats a chat template's text shows.
#include "shared/output_format_detection.h"

namespace flashq {

using protocol::OutputFormat;
using protocol::ReasoningFormat;
using protocol::ToolCallFormat;

OutputFormat detect_output_format(std::string_view model_type, std::string_view chat_template) {
  auto mentions = [&](std::string_view s) { return chat_template.find(s) != std::string_view::npos; };
  OutputFormat format;
  if (mentions("<|channel|>")) return {ToolCallFormat::kHarmony, ReasoningFormat::kHarmony};
  if (mentions("<tool_call>")) {
    format.tool_calls = mentions("<function=") ? ToolCallFormat::kNone : ToolCallFormat::kHermes;
  } else if (model_type == "llama" || mentions("<|python_tag|>")) {
    format.tool_calls = ToolCallFormat::kLlama3Json;
  }
  if (mentions("<think>")) format.reasoning = ReasoningFormat::kThinkTags;
  return format;
}

bool prompt_opens_reasoning(std::string_view rendered_prompt) {
  while (!rendered_prompt.empty() &&
         (rendered_prompt.back() == '\n' || rendered_prompt.back() == ' ')) {
    rendered_prompt.remove_suffix(1);
  }
  return rendered_prompt.ends_with("<think>");
}

}  // namespace flashq
