// The parser chain for a model's output format and a request's options.
#include "gateway/output/output_parser_factory.h"

#include <string>

#include "gateway/output/harmony_parser.h"
#include "gateway/output/hermes_tool_parser.h"
#include "gateway/output/llama3_json_tool_parser.h"
#include "gateway/output/plain_output_parser.h"
#include "gateway/output/think_tag_parser.h"

namespace flashq::gateway {

ToolCallIdGenerator index_tool_call_ids(std::string_view prefix) {
  return [p = std::string(prefix)](int index) { return p + std::to_string(index); };
}

std::unique_ptr<OutputParser> make_output_parser(const OutputFormat& format,
                                                 const OutputParserOptions& options) {
  if (format.tool_calls == ToolCallFormat::kHarmony || format.reasoning == ReasoningFormat::kHarmony) {
    // One parser reads harmony's channels: reasoning, content and tool calls alike.
    return std::make_unique<HarmonyParser>(options.parse_tool_calls, options.parse_reasoning,
                                           options.argument_streaming, options.make_tool_call_id);
  }
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
  if (options.parse_reasoning && format.reasoning != ReasoningFormat::kNone) {
    parser = std::make_unique<ThinkTagParser>(std::move(parser), options.starts_in_reasoning);
  }
  return parser;
}

}  // namespace flashq::gateway
