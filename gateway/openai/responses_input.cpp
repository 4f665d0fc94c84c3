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

// The fields of each input item and content part (OpenAI's ResponseInputItem).
constexpr std::string_view kInputTextFields[] = {"type", "text"};
constexpr std::string_view kOutputTextFields[] = {"type", "text", "annotations", "logprobs"};
constexpr std::string_view kRefusalFields[] = {"type", "refusal"};
constexpr std::string_view kReasoningItemFields[] = {"type", "id", "summary", "content", "encrypted_content", "status"};
constexpr std::string_view kReasoningPartFields[] = {"type", "text"};
constexpr std::string_view kMessageItemFields[] = {"type", "role", "content", "id", "status", "phase"};
constexpr std::string_view kFunctionCallFields[] = {"type", "call_id", "name", "arguments", "id", "status"};
constexpr std::string_view kFunctionCallOutputFields[] = {"type", "call_id", "output", "id", "status"};

constexpr BodyDialect kDialect = BodyDialect::kResponses;

// One content part's text.
std::string read_content_part(RequestBody& part, const std::string& role) {
  const std::string type = part.require_string("type");
  if (type == "input_text" || type == "output_text") {
    // OpenAI pairs input_text with the roles that speak to the model and output_text with the
    // assistant; a client that mixes them still means text, and refusing would gain nothing.
    part.refuse_unknown(type == "input_text" ? FieldTable(kInputTextFields) : FieldTable(kOutputTextFields));
    return part.require_string("text");
  }
  if (type == "refusal" && role == "assistant") {
    part.refuse_unknown(kRefusalFields);
    return part.require_string("refusal");
  }
  if (type == "input_image" || type == "input_file" || type == "input_audio") {
    throw unsupported_parameter(part.field("type"), "the models served read text only ('" + type + "')");
  }
  throw invalid_request("'" + part.field("type") + "' '" + type + "' is not a content part of a " + role + " message",
                        part.field("type"));
}

// The text of a message's content: a string, or a list of text parts joined by "\n".
std::string read_content(const BodyJson& content, const std::string& role, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  array_value(content, at, kDialect);
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    RequestBody part(content[j], element_path(at, j), kDialect);
    const std::string piece = read_content_part(part, role);
    if (j > 0) text += "\n";
    text += piece;
  }
  return text;
}

// A reasoning item's parts of `part_type` under `key`, joined by "\n".
std::string join_reasoning_parts(RequestBody& item, std::string_view key, std::string_view part_type) {
  std::string text;
  const BodyJson* parts = item.array(key);
  if (!parts) return text;
  for (std::size_t j = 0; j < parts->size(); ++j) {
    RequestBody part((*parts)[j], element_path(item.field(key), j), kDialect);
    part.refuse_unknown(kReasoningPartFields);
    if (part.require_string("type") != part_type) {
      throw invalid_request("'" + part.field("type") + "' must be " + std::string(part_type), part.field("type"));
    }
    if (j > 0) text += "\n";
    text += part.require_string("text");
  }
  return text;
}

std::string read_reasoning(RequestBody& item) {
  item.refuse_unknown(kReasoningItemFields);
  // Reasoning sealed for another server cannot be read back into a template.
  if (item.find("encrypted_content")) {
    throw unsupported_parameter(item.field("encrypted_content"), "reasoning is returned and taken back as reasoning_text");
  }
  const std::string content = join_reasoning_parts(item, "content", "reasoning_text");
  const std::string summary = join_reasoning_parts(item, "summary", "summary_text");
  return content.empty() ? summary : content;
}

protocol::ToolCall read_function_call(RequestBody& item) {
  item.refuse_unknown(kFunctionCallFields);
  protocol::ToolCall call;
  call.id = item.require_string("call_id");
  call.name = item.require_string("name");
  const std::string arguments = item.require_string("arguments");
  // OpenAI's form: a JSON string holding the arguments' JSON text (job.h, ToolCall).
  call.arguments_json = BodyJson(arguments).dump(-1, ' ', false, BodyJson::error_handler_t::replace);
  if (call.name.empty()) throw invalid_request("'" + item.field("name") + "' is empty", item.field("name"));
  return call;
}

ChatMessage read_function_call_output(RequestBody& item, const std::map<std::string, std::string>& call_names) {
  item.refuse_unknown(kFunctionCallOutputFields);
  ChatMessage result{.role = "tool"};
  result.tool_call_id = item.require_string("call_id");
  result.content = read_content(item.require("output"), "tool", item.field("output"));
  if (const auto name = call_names.find(*result.tool_call_id); name != call_names.end()) {
    result.name = name->second;
  }
  return result;
}

// A message item: an assistant's joins the turn being assembled, any other role closes it.
void read_message_item(RequestBody& item, AssistantTurn& turn, std::vector<ChatMessage>& messages) {
  item.refuse_unknown(kMessageItemFields);
  const std::string role = item.require_string("role");
  const BodyJson& content = item.require("content");
  if (role == "assistant") {
    if (turn.has_output()) turn.close_into(messages);
    turn.add_content(read_content(content, role, item.field("content")));
    return;
  }
  if (role != "user" && role != "system" && role != "developer") {
    throw invalid_request("'" + item.field("role") + "' must be one of user, system, developer, assistant",
                          item.field("role"));
  }
  turn.close_into(messages);
  messages.push_back(
      {.role = role == "developer" ? "system" : role, .content = read_content(content, role, item.field("content"))});
}

}  // namespace

std::vector<ChatMessage> read_responses_input(const BodyJson& input,
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
    RequestBody item(input[i], element_path("input", i), kDialect);
    // OpenAI's easy input message omits type.
    const std::string type = item.string("type").value_or("message");
    if (type == "message") {
      read_message_item(item, turn, messages);
    } else if (type == "reasoning") {
      if (turn.has_output()) turn.close_into(messages);
      turn.add_reasoning(read_reasoning(item));
    } else if (type == "function_call") {
      protocol::ToolCall call = read_function_call(item);
      call_names[call.id] = call.name;
      turn.add_call(std::move(call));
    } else if (type == "function_call_output") {
      turn.close_into(messages);
      messages.push_back(read_function_call_output(item, call_names));
    } else if (type == "item_reference") {
      throw unsupported_parameter(item.field("type"), "items are not stored for reference; send the item itself");
    } else {
      throw unsupported_parameter(item.field("type"), "'" + type +
                                                          "' items are not served: only message, reasoning, "
                                                          "function_call and function_call_output");
    }
  }
  turn.close_into(messages);
  return messages;
}

}  // namespace flashq::gateway
