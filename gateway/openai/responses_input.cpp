// Responses API input items folded into chat messages.
#include "gateway/openai/responses_input.h"

#include <map>

#include "gateway/openai/api_error.h"

namespace flashq::gateway {

namespace {

using protocol::ChatMessage;

// The assistant turn being assembled from reasoning, message and function_call items; it is
// closed (pushed) by any item of another role, or by an item that could not belong to the same
// turn (a second reasoning or message after the turn already holds text or calls).
class AssistantTurn {
 public:
  bool open() const { return open_; }
  bool has_output() const { return content_.has_value() || !turn_.tool_calls.empty(); }

  void add_reasoning(const std::string& text) {
    open_ = true;
    turn_.reasoning_content = turn_.reasoning_content ? *turn_.reasoning_content + "\n" + text : text;
  }
  void add_content(const std::string& text) {
    open_ = true;
    content_ = text;
  }
  void add_call(protocol::ToolCall call) {
    open_ = true;
    turn_.tool_calls.push_back(std::move(call));
  }
  void close_into(std::vector<ChatMessage>& out) {
    if (!open_) return;
    turn_.role = "assistant";
    // A turn with calls and no text has no content (nil on the wire); a turn of reasoning
    // alone still needs one, empty.
    if (content_ || turn_.tool_calls.empty()) turn_.content = content_.value_or("");
    out.push_back(std::move(turn_));
    *this = AssistantTurn();
  }

 private:
  bool open_ = false;
  ChatMessage turn_;
  std::optional<std::string> content_;
};

// The text of a message's content: a string, or a list of text parts joined by "\n".
std::string read_content(const ResponsesJson& content, const std::string& role, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  as_array(content, at);
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string part_at = element_path(at, j);
    const ResponsesJson& part = as_object(content[j], part_at);
    const ResponsesJson* type_value = optional_field(part, "type");
    if (!type_value) throw invalid_request("'" + part_at + ".type' is required", part_at + ".type", "missing_required_parameter");
    const std::string& type = as_string(*type_value, part_at + ".type");
    std::string piece;
    if (type == "input_text" || type == "output_text") {
      // OpenAI pairs input_text with the roles that speak to the model and output_text with the
      // assistant; a client that mixes them still means text, and refusing would gain nothing.
      if (type == "input_text") {
        check_known_fields(part, {"type", "text"}, part_at);
      } else {
        check_known_fields(part, {"type", "text", "annotations", "logprobs"}, part_at);
      }
      const ResponsesJson* text_value = optional_field(part, "text");
      if (!text_value) throw invalid_request("'" + part_at + ".text' is required", part_at + ".text", "missing_required_parameter");
      piece = as_string(*text_value, part_at + ".text");
    } else if (type == "refusal" && role == "assistant") {
      check_known_fields(part, {"type", "refusal"}, part_at);
      const ResponsesJson* refusal = optional_field(part, "refusal");
      if (!refusal) throw invalid_request("'" + part_at + ".refusal' is required", part_at + ".refusal", "missing_required_parameter");
      piece = as_string(*refusal, part_at + ".refusal");
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      throw unsupported_parameter(part_at + ".type", "the models served read text only ('" + type + "')");
    } else {
      throw invalid_request("'" + part_at + ".type' '" + type + "' is not a content part of a " + role + " message",
                            part_at + ".type");
    }
    if (j > 0) text += "\n";
    text += piece;
  }
  return text;
}

std::string required_string(const ResponsesJson& item, std::string_view key, const std::string& at) {
  const std::string path = field_path(at, key);
  const ResponsesJson* value = optional_field(item, key);
  if (!value) throw invalid_request("'" + path + "' is required", path, "missing_required_parameter");
  return as_string(*value, path);
}

std::string read_reasoning(const ResponsesJson& item, const std::string& at) {
  check_known_fields(item, {"type", "id", "summary", "content", "encrypted_content", "status"}, at);
  // Reasoning sealed for another server cannot be read back into a template.
  if (optional_field(item, "encrypted_content")) {
    throw unsupported_parameter(at + ".encrypted_content", "reasoning is returned and taken back as reasoning_text");
  }
  auto join_parts = [&](std::string_view key, std::string_view part_type) {
    std::string text;
    const ResponsesJson* parts = optional_field(item, key);
    if (!parts) return text;
    const std::string parts_at = field_path(at, key);
    as_array(*parts, parts_at);
    for (std::size_t j = 0; j < parts->size(); ++j) {
      const std::string part_at = element_path(parts_at, j);
      const ResponsesJson& part = as_object((*parts)[j], part_at);
      check_known_fields(part, {"type", "text"}, part_at);
      if (required_string(part, "type", part_at) != part_type) {
        throw invalid_request("'" + part_at + ".type' must be " + std::string(part_type), part_at + ".type");
      }
      if (j > 0) text += "\n";
      text += required_string(part, "text", part_at);
    }
    return text;
  };
  const std::string content = join_parts("content", "reasoning_text");
  const std::string summary = join_parts("summary", "summary_text");
  return content.empty() ? summary : content;
}

}  // namespace

std::vector<ChatMessage> read_responses_input(const ResponsesJson& input,
                                              const std::optional<std::string>& instructions) {
  std::vector<ChatMessage> messages;
  if (instructions) messages.push_back({.role = "system", .content = *instructions});
  if (input.is_string()) {
    messages.push_back({.role = "user", .content = input.get<std::string>()});
    return messages;
  }
  if (!input.is_array()) throw invalid_request("'input' must be a string or an array of items", "input", "invalid_type");
  if (input.empty()) throw invalid_request("'input' is empty", "input", "empty_array");

  AssistantTurn turn;
  std::map<std::string, std::string> call_names;  // call_id -> function name, for tool results
  for (std::size_t i = 0; i < input.size(); ++i) {
    const std::string at = element_path("input", i);
    const ResponsesJson& item = as_object(input[i], at);
    const ResponsesJson* type_value = optional_field(item, "type");
    // OpenAI's easy input message omits type.
    const std::string type = type_value ? as_string(*type_value, at + ".type") : "message";
    if (type == "message") {
      check_known_fields(item, {"type", "role", "content", "id", "status", "phase"}, at);
      const std::string role = required_string(item, "role", at);
      const ResponsesJson* content = optional_field(item, "content");
      if (!content) throw invalid_request("'" + at + ".content' is required", at + ".content", "missing_required_parameter");
      if (role == "assistant") {
        if (turn.has_output()) turn.close_into(messages);
        turn.add_content(read_content(*content, role, at + ".content"));
        continue;
      }
      if (role != "user" && role != "system" && role != "developer") {
        throw invalid_request("'" + at + ".role' must be one of user, system, developer, assistant", at + ".role");
      }
      turn.close_into(messages);
      messages.push_back({.role = role == "developer" ? "system" : role,
                          .content = read_content(*content, role, at + ".content")});
    } else if (type == "reasoning") {
      if (turn.has_output()) turn.close_into(messages);
      turn.add_reasoning(read_reasoning(item, at));
    } else if (type == "function_call") {
      check_known_fields(item, {"type", "call_id", "name", "arguments", "id", "status"}, at);
      protocol::ToolCall call;
      call.id = required_string(item, "call_id", at);
      call.name = required_string(item, "name", at);
      const std::string arguments = required_string(item, "arguments", at);
      // OpenAI's form: a JSON string holding the arguments' JSON text (job.h, ToolCall).
      call.arguments_json = ResponsesJson(arguments).dump(-1, ' ', false, ResponsesJson::error_handler_t::replace);
      if (call.name.empty()) throw invalid_request("'" + at + ".name' is empty", at + ".name");
      call_names[call.id] = call.name;
      turn.add_call(std::move(call));
    } else if (type == "function_call_output") {
      check_known_fields(item, {"type", "call_id", "output", "id", "status"}, at);
      turn.close_into(messages);
      ChatMessage result{.role = "tool"};
      result.tool_call_id = required_string(item, "call_id", at);
      const ResponsesJson* output = optional_field(item, "output");
      if (!output) throw invalid_request("'" + at + ".output' is required", at + ".output", "missing_required_parameter");
      result.content = read_content(*output, "tool", at + ".output");
      if (const auto name = call_names.find(*result.tool_call_id); name != call_names.end()) {
        result.name = name->second;
      }
      messages.push_back(std::move(result));
    } else if (type == "item_reference") {
      throw unsupported_parameter(at + ".type", "items are not stored for reference; send the item itself");
    } else {
      throw unsupported_parameter(at + ".type", "'" + type +
                                                    "' items are not served: only message, reasoning, "
                                                    "function_call and function_call_output");
    }
  }
  turn.close_into(messages);
  return messages;
}

}  // namespace flashq::gateway
