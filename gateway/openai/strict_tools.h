// Function tools with `strict: true` read into the job's `structured_output` as a tool_calls
// grammar (docs/gateway.md, "Strict tools"; worker/grammar/tool_call_grammar.h): with a
// required or named tool_choice the output is a call in the model's tool-call format from its
// first token (after its reasoning), with "auto" it is free until the model opens a call. The
// grammar engine checks it here, so a schema it cannot take is a 400 naming the tool, never a
// job that fails on the worker.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/output/output_parser_factory.h"
#include "gateway/output/tool_choice.h"

namespace flashq::gateway {

struct StrictTool {
  std::string name;
  std::optional<nlohmann::ordered_json> parameters;  // absent: no parameters
  bool strict = false;
};

struct StrictToolRequest {
  std::vector<StrictTool> tools;  // as given (a named choice picks its tool from them)
  ToolChoice choice;
  OutputFormat format;
  bool parallel = true;
  bool starts_in_reasoning = false;  // the prompt opened the reasoning block
  bool thinking_off = false;         // the template was asked not to reason (enable_thinking: false)
  // The request's own structured output (response_format, text.format, guided_*): with "auto" the
  // answer that opens no call obeys it; a required or named choice makes the output a call.
  std::optional<std::string> answer;
};

// The job's structured_output: the tool_calls grammar's, or `answer` unchanged when no strict
// tool is involved (tool_choice none, a named tool that is not strict, no strict tool at all).
// 400s: a model whose tool-call format no parser knows; a tool the grammar engine cannot take
// (its name or its schema), with `param` naming the tools field.
std::optional<std::string> constrain_tool_calls(const StrictToolRequest& request, const std::string& param);

// Chat completions' tools ({type: "function", function: {name, parameters, strict}}).
std::vector<StrictTool> chat_strict_tools(const nlohmann::ordered_json& tools);
// The Responses API's tools as its response object echoes them ({type, name, parameters, strict}).
std::vector<StrictTool> responses_strict_tools(const nlohmann::ordered_json& tools);

}  // namespace flashq::gateway
