// OpenAI's tool_choice and what it asks of a finished completion: the finish_reason to report
// (`tool_calls` when the model made a complete call, else `stop` or `length`) and whether a
// `required` or named choice was not met. The gateway decides how a violation is answered; this
// only says so. A request with tool_choice "none" is parsed with no tool-call parser
// (OutputParserOptions::parse_tool_calls), so its calls, if the model still writes one, are
// content.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gateway/output/output_delta.h"

namespace flashq::gateway {

enum class ToolChoiceMode { kNone, kAuto, kRequired, kNamed };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string function_name;  // kNamed

  bool operator==(const ToolChoice&) const = default;
};

// "none", "auto", "required", or {"type": "function", "function": {"name": "..."}}; an absent
// (null) value is "auto" when the request has tools and "none" without, as OpenAI defaults it.
// Anything else throws flashq::Error kInvalidArgument naming the problem.
ToolChoice parse_tool_choice(const nlohmann::json& value, bool request_has_tools);

bool parses_tool_calls(const ToolChoice& choice);

// How generation ended, as the engine reports it.
enum class GenerationEnd { kStop, kLength };

struct ToolChoiceVerdict {
  std::string finish_reason;  // "tool_calls", "stop" or "length"
  bool violated = false;      // the choice asked for a call the completion does not hold
  std::string violation;      // what was not met, for the gateway's error or log
};

ToolChoiceVerdict judge_tool_choice(const ToolChoice& choice, const AssistantMessage& message,
                                    GenerationEnd end);

}  // namespace flashq::gateway
