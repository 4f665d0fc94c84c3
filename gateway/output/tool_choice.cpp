// tool_choice parsing and the verdict on a finished completion.
#include "gateway/output/tool_choice.h"

#include "shared/error.h"

namespace flashq::gateway {

ToolChoice parse_tool_choice(const nlohmann::json& value, bool request_has_tools) {
  if (value.is_null()) {
    return {request_has_tools ? ToolChoiceMode::kAuto : ToolChoiceMode::kNone, ""};
  }
  if (value.is_string()) {
    const std::string& mode = value.get_ref<const std::string&>();
    if (mode == "none") return {ToolChoiceMode::kNone, ""};
    if (mode == "auto") return {ToolChoiceMode::kAuto, ""};
    if (mode == "required") return {ToolChoiceMode::kRequired, ""};
    throw Error(ErrorCode::kInvalidArgument,
                "tool_choice: '" + mode + "' is not one of none, auto, required");
  }
  if (value.is_object()) {
    const auto type = value.find("type");
    if (type == value.end() || *type != "function") {
      throw Error(ErrorCode::kInvalidArgument, "tool_choice: an object must have type \"function\"");
    }
    const auto function = value.find("function");
    if (function == value.end() || !function->is_object()) {
      throw Error(ErrorCode::kInvalidArgument, "tool_choice: function must be an object");
    }
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      throw Error(ErrorCode::kInvalidArgument, "tool_choice: function.name must be a non-empty string");
    }
    if (!request_has_tools) {
      throw Error(ErrorCode::kInvalidArgument, "tool_choice: names a function but the request has no tools");
    }
    return {ToolChoiceMode::kNamed, name->get<std::string>()};
  }
  throw Error(ErrorCode::kInvalidArgument, "tool_choice: must be a string or an object");
}

bool parses_tool_calls(const ToolChoice& choice) { return choice.mode != ToolChoiceMode::kNone; }

ToolChoiceVerdict judge_tool_choice(const ToolChoice& choice, const AssistantMessage& message,
                                    GenerationEnd end) {
  ToolChoiceVerdict verdict;
  const std::size_t calls = message.complete_tool_calls();
  if (calls > 0) {
    verdict.finish_reason = "tool_calls";
  } else {
    verdict.finish_reason = end == GenerationEnd::kLength ? "length" : "stop";
  }
  switch (choice.mode) {
    case ToolChoiceMode::kAuto:
      break;
    case ToolChoiceMode::kNone:
      if (!message.tool_calls.empty()) {
        verdict.violated = true;
        verdict.violation = "tool_choice is none but the completion holds a tool call";
      }
      break;
    case ToolChoiceMode::kRequired:
      if (calls == 0) {
        verdict.violated = true;
        verdict.violation = "tool_choice is required but the model made no complete tool call";
      }
      break;
    case ToolChoiceMode::kNamed:
      if (calls == 0) {
        verdict.violated = true;
        verdict.violation = "tool_choice names " + choice.function_name +
                            " but the model made no complete tool call";
        break;
      }
      for (const ParsedToolCall& call : message.tool_calls) {
        if (call.name != choice.function_name) {
          verdict.violated = true;
          verdict.violation = "tool_choice names " + choice.function_name +
                              " but the model called " + call.name;
          break;
        }
      }
      break;
  }
  return verdict;
}

}  // namespace flashq::gateway
