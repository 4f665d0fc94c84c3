#include "shared/protocol/chat_fields.h"

#include <algorithm>
#include <iterator>

#include "shared/error.h"
#include "shared/protocol/json_value.h"
#include "shared/protocol/limits.h"

namespace flashq::protocol {
namespace {

std::string encode_tool_call(const ToolCall& call) {
  MapWriter function;
  function.string("name", call.name).raw("arguments", pack_json_text(call.arguments_json, "tool call arguments"));
  MapWriter out;
  if (!call.id.empty()) out.string("id", call.id);
  return out.string("type", "function").map("function", function.finish()).finish();
}

std::string encode_chat_message(const ChatMessage& message) {
  MapWriter out;
  out.string("role", message.role);
  if (message.content) out.string("content", *message.content);
  if (!message.tool_calls.empty()) {
    std::vector<std::string> calls;
    for (const ToolCall& call : message.tool_calls) calls.push_back(encode_tool_call(call));
    out.maps("tool_calls", calls);
  }
  if (message.tool_call_id) out.string("tool_call_id", *message.tool_call_id);
  if (message.name) out.string("name", *message.name);
  if (message.reasoning_content) out.string("reasoning_content", *message.reasoning_content);
  return out.finish();
}

ToolCall read_tool_call(const FieldReader& call) {
  ToolCall out;
  out.id = call.optional_string("id", {1, kMaxToolCallIdBytes}).value_or("");
  const std::optional<std::string> type = call.optional_string("type", {1, kMaxCodeBytes});
  if (type && *type != "function") call.fail("type", "must be \"function\"");
  const FieldReader function = call.map("function");
  out.name = function.string("name", {1, kMaxNameBytes});
  out.arguments_json = read_json_text(function.require("arguments"), function.field_path("arguments"));
  return out;
}

std::vector<ToolCall> read_tool_calls(const FieldReader& message) {
  const msgpack::object* value = message.find("tool_calls");
  if (value == nullptr) return {};
  const FieldPath at = message.field_path("tool_calls");
  std::vector<ToolCall> calls;
  const auto elements = read_array(*value, at, kMaxToolCalls);
  for (std::size_t i = 0; i < elements.size(); ++i)
    calls.push_back(read_tool_call(FieldReader(elements[i], at.element(i))));
  return calls;
}

ChatMessage read_message(const FieldReader& message) {
  ChatMessage m;
  m.role = message.string("role", {1, kMaxCodeBytes});
  m.tool_calls = read_tool_calls(message);
  // OpenAI's assistant turn that only calls tools has no content; every other turn has some.
  if (m.tool_calls.empty() || message.has("content")) m.content = message.string("content", {0, kMaxPromptBytes});
  m.tool_call_id = message.optional_string("tool_call_id", {1, kMaxToolCallIdBytes});
  m.name = message.optional_string("name", {1, kMaxNameBytes});
  m.reasoning_content = message.optional_string("reasoning_content", {0, kMaxPromptBytes});
  return m;
}

std::size_t chat_text_bytes(const ChatMessage& m) {
  std::size_t bytes = m.content.value_or("").size() + m.reasoning_content.value_or("").size();
  for (const ToolCall& call : m.tool_calls) bytes += call.arguments_json.size();
  return bytes;
}

// The value as JSON text, at most `max_bytes` both as it came and as the msgpack this side
// sends again (invalid UTF-8 has become U+FFFD, floats float64), so that a decoded job encodes
// to one that decodes.
std::string read_bounded_json(const msgpack::object& value, const FieldPath& at, std::size_t max_bytes) {
  const std::size_t sent = read_raw(value).size();
  if (sent > max_bytes) {
    at.fail(std::to_string(sent) + " bytes of msgpack, over the limit of " + std::to_string(max_bytes));
  }
  std::string text = read_json_text(value, at);
  const std::size_t again = pack_json_text(text, at.path).size();
  if (again > max_bytes) {
    at.fail(std::to_string(again) + " bytes of msgpack once its strings are UTF-8, over the limit of " +
            std::to_string(max_bytes));
  }
  return text;
}

void check_tool(const FieldReader& tool) {
  const std::string type = tool.string("type", {1, kMaxCodeBytes});
  if (type == "function") tool.map("function").string("name", {1, kMaxNameBytes});
}

std::string read_tools(const FieldReader& job) {
  const msgpack::object& value = job.require("tools");
  const FieldPath at = job.field_path("tools");
  const auto elements = read_array(value, at, kMaxTools);
  for (std::size_t i = 0; i < elements.size(); ++i) check_tool(FieldReader(elements[i], at.element(i)));
  return read_bounded_json(value, at, kMaxToolsBytes);
}

std::string read_template_options(const FieldReader& job) {
  const msgpack::object& value = job.require("chat_template_kwargs");
  const FieldPath at = job.field_path("chat_template_kwargs");
  const FieldReader options(value, at);  // a map with unique string keys
  const std::uint32_t count = value.via.map.size;
  if (count > kMaxTemplateOptions) {
    at.fail("at most " + std::to_string(kMaxTemplateOptions) + " options, got " + std::to_string(count));
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    const msgpack::object& key = value.via.map.ptr[i].key;
    read_string(key, at.element(i), {1, kMaxCodeBytes});
    const std::string_view name(key.via.str.ptr, key.via.str.size);
    if (std::find(std::begin(kReservedTemplateVariables), std::end(kReservedTemplateVariables), name) !=
        std::end(kReservedTemplateVariables)) {
      at.fail("may not set \"" + std::string(name) + "\" (a field of the job itself)");
    }
  }
  return read_bounded_json(value, at, kMaxTemplateOptionsBytes);
}

}  // namespace

void write_messages(MapWriter& out, const std::vector<ChatMessage>& messages) {
  std::vector<std::string> maps;
  for (const ChatMessage& message : messages) maps.push_back(encode_chat_message(message));
  out.maps("messages", maps);
}

std::vector<ChatMessage> read_messages(const FieldReader& job) {
  const FieldPath at = job.field_path("messages");
  const auto elements = read_array(job.require("messages"), at, kMaxChatMessages);
  if (elements.empty()) at.fail("must hold at least one message");
  std::vector<ChatMessage> messages;
  std::size_t text_bytes = 0;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    ChatMessage m = read_message(FieldReader(elements[i], at.element(i)));
    text_bytes += chat_text_bytes(m);
    if (text_bytes > kMaxPromptBytes) {
      at.fail("content of all messages (with reasoning and tool call arguments) over the limit of " +
              std::to_string(kMaxPromptBytes) + " bytes");
    }
    messages.push_back(std::move(m));
  }
  return messages;
}

void write_chat_options(MapWriter& out, const Job& job) {
  if (!std::holds_alternative<std::vector<ChatMessage>>(job.prompt)) {
    if (job.tools || job.chat_template_kwargs) {
      throw Error(ErrorCode::kProtocol,
                  "job fields tools and chat_template_kwargs: only a job with messages may carry them");
    }
    return;
  }
  if (job.tools) out.raw("tools", pack_json_text(*job.tools, "job field tools"));
  if (job.chat_template_kwargs) {
    out.raw("chat_template_kwargs", pack_json_text(*job.chat_template_kwargs, "job field chat_template_kwargs"));
  }
  out.boolean("add_generation_prompt", job.add_generation_prompt);
}

void read_chat_options(const FieldReader& fields, Job& job) {
  const bool chat = std::holds_alternative<std::vector<ChatMessage>>(job.prompt);
  for (const char* key : {"tools", "chat_template_kwargs", "add_generation_prompt"}) {
    if (!chat && fields.has(key)) fields.fail(key, "only a job with messages may carry it");
  }
  if (!chat) return;
  if (fields.has("tools")) job.tools = read_tools(fields);
  if (fields.has("chat_template_kwargs")) job.chat_template_kwargs = read_template_options(fields);
  job.add_generation_prompt = fields.boolean_or("add_generation_prompt", job.add_generation_prompt);
}

}  // namespace flashq::protocol
