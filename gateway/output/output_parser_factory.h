// Which parser reads a model's output, chosen from what the model's chat template writes, and
// the parser made for one completion.
//
// The formats themselves (ToolCallFormat, ReasoningFormat, OutputFormat) are the protocol's
// (shared/protocol/output_format.h: READY and MODELS_REPLY carry them); how a chat template shows
// them is shared/output_format_detection.h, used by the worker at load. Both are named here too,
// as the gateway's own.
//
// make_output_parser() builds the chain: ThinkTagParser (when the format has reasoning and the
// request wants it split) in front of the tool-call parser (when the request has tools and its
// tool_choice is not "none"), else PlainOutputParser. kThinkInPrompt parses as kThinkTags: whether
// a request's output starts inside the reasoning is the request's (starts_in_reasoning), since a
// request may turn thinking off. A harmony format (gpt-oss) is read by HarmonyParser alone, which
// splits reasoning, content and tool calls by channel as the options ask.
#pragma once

#include <memory>
#include <string_view>

#include "gateway/output/output_parser.h"
#include "shared/output_format_detection.h"
#include "shared/protocol/output_format.h"

namespace flashq::gateway {

using protocol::OutputFormat;
using protocol::ReasoningFormat;
using protocol::ToolCallFormat;
using protocol::reasoning_format_name;
using protocol::tool_call_format_name;
using flashq::detect_output_format;
using flashq::prompt_opens_reasoning;

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
