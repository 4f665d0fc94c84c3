#include "gateway/openai/strict_tools.h"

#include <algorithm>

#include "gateway/openai/api_error.h"
#include "shared/error.h"
#include "worker/grammar/gbnf_parser.h"
#include "worker/grammar/structured_output.h"

namespace flashq::gateway {
namespace {

// Where the output starts relative to the model's reasoning, as tool_call_grammar.h names it.
const char* reasoning_start(const StrictToolRequest& request) {
  switch (request.format.reasoning) {
    case ReasoningFormat::kNone: return "none";
    // The template cannot turn harmony's analysis off; a request that asks for no thinking gets
    // the call at once.
    case ReasoningFormat::kHarmony: return request.thinking_off ? "none" : "optional";
    case ReasoningFormat::kThinkTags:
    case ReasoningFormat::kThinkInPrompt:
      if (request.starts_in_reasoning) return "inside";
      return request.thinking_off ? "none" : "optional";
  }
  return "none";
}

const char* choice_name(ToolChoiceMode mode) {
  switch (mode) {
    case ToolChoiceMode::kRequired: return "required";
    case ToolChoiceMode::kNamed: return "named";
    default: return "auto";
  }
}

// The tools the grammar holds: a named choice's one, else all of them.
std::vector<StrictTool> constrained_tools(const StrictToolRequest& request) {
  if (request.choice.mode != ToolChoiceMode::kNamed) return request.tools;
  std::vector<StrictTool> named;
  for (const StrictTool& tool : request.tools) {
    if (tool.name == request.choice.function_name) named.push_back(tool);
  }
  return named;
}

nlohmann::ordered_json tool_calls_output(const StrictToolRequest& request, const std::vector<StrictTool>& tools) {
  nlohmann::ordered_json output = {{"type", "tool_calls"},
                                   {"format", tool_call_format_name(request.format.tool_calls)},
                                   {"choice", choice_name(request.choice.mode)},
                                   {"tools", nlohmann::ordered_json::array()},
                                   {"parallel", request.parallel},
                                   {"reasoning", reasoning_start(request)}};
  for (const StrictTool& tool : tools) {
    nlohmann::ordered_json entry = {{"name", tool.name}, {"strict", tool.strict}};
    if (tool.parameters) entry["parameters"] = *tool.parameters;
    output["tools"].push_back(std::move(entry));
  }
  if (request.choice.mode == ToolChoiceMode::kAuto && request.answer) {
    output["answer"] = nlohmann::ordered_json::parse(*request.answer);
  }
  return output;
}

}  // namespace

std::optional<std::string> constrain_tool_calls(const StrictToolRequest& request, const std::string& param) {
  const ToolChoiceMode mode = request.choice.mode;
  if (mode == ToolChoiceMode::kNone) return request.answer;
  const std::vector<StrictTool> tools = constrained_tools(request);
  const bool any_strict = std::any_of(tools.begin(), tools.end(), [](const StrictTool& t) { return t.strict; });
  if (!any_strict) return request.answer;
  if (request.format.tool_calls == ToolCallFormat::kNone) {
    throw unsupported_parameter(param, "strict tools are held to the model's tool-call format, and no parser knows "
                                       "this model's (its chat template's format is not one flashq knows)");
  }
  const std::string output = tool_calls_output(request, tools).dump();
  try {
    (void)grammar::parse_gbnf(grammar::read_structured_output(output).text);
  } catch (const Error& e) {
    throw invalid_request("'" + param + "': " + e.what(), param);
  }
  return output;
}

std::vector<StrictTool> chat_strict_tools(const nlohmann::ordered_json& tools) {
  std::vector<StrictTool> out;
  for (const nlohmann::ordered_json& tool : tools) {
    const nlohmann::ordered_json& function = tool.at("function");
    StrictTool strict_tool{.name = function.at("name").get<std::string>()};
    if (const auto parameters = function.find("parameters"); parameters != function.end()) {
      strict_tool.parameters = *parameters;
    }
    if (const auto strict = function.find("strict"); strict != function.end() && strict->is_boolean()) {
      strict_tool.strict = strict->get<bool>();
    }
    out.push_back(std::move(strict_tool));
  }
  return out;
}

std::vector<StrictTool> responses_strict_tools(const nlohmann::ordered_json& tools) {
  std::vector<StrictTool> out;
  for (const nlohmann::ordered_json& tool : tools) {
    StrictTool strict_tool{.name = tool.at("name").get<std::string>(), .strict = tool.value("strict", false)};
    if (const nlohmann::ordered_json& parameters = tool.at("parameters"); !parameters.is_null()) {
      strict_tool.parameters = parameters;
    }
    out.push_back(std::move(strict_tool));
  }
  return out;
}

}  // namespace flashq::gateway
