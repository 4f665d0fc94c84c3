#include "broker/redis/redis_job_fields.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/strict_unpack.h"

namespace flashq {
namespace {

// Ordered: key order of tool definitions and messages is kept, as templates render it.
using json = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& field, const std::string& why) {
  throw Error(ErrorCode::kProtocol, "redis job field " + field + ": " + why);
}

template <typename Number>
Number parse_integer(const std::string& field, const std::string& text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    refuse(field, "'" + text + "' is not an integer in range");
  }
  return value;
}

double parse_double(const std::string& field, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
    refuse(field, "'" + text + "' is not a finite number");
  }
  return value;
}

// Whether JSON `text` nests arrays and objects deeper than a message may (limits.h). Checked
// before parsing: the JSON library parses iteratively but writes msgpack recursively, and an
// entry of a million '[' would overflow the broker's stack.
bool nested_too_deep(const std::string& text) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > protocol::kMaxDepth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

json parse_json(const std::string& field, const std::string& text) {
  if (nested_too_deep(text)) refuse(field, "nested deeper than " + std::to_string(protocol::kMaxDepth) + " levels");
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) refuse(field, "is not valid JSON");
  return value;
}

// JSON text of `value`. Strings are meant to be UTF-8 but the wire does not check them
// (docs/protocol.md); JSON cannot hold other bytes, so each invalid sequence is written as U+FFFD,
// the repair the tokenizer makes of such text anyway.
std::string json_text(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// A message as the JSON map of the wire: only the keys it has.
json message_json(const protocol::ChatMessage& m) {
  json out = {{"role", m.role}};
  if (m.content) out["content"] = *m.content;
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const protocol::ToolCall& call : m.tool_calls) {
      json c = json::object();
      if (!call.id.empty()) c["id"] = call.id;
      c["type"] = "function";
      json arguments = json::parse(call.arguments_json, nullptr, /*allow_exceptions=*/false);
      if (arguments.is_discarded()) throw Error(ErrorCode::kProtocol, "job tool call arguments: not valid JSON text");
      c["function"] = {{"name", call.name}, {"arguments", std::move(arguments)}};
      calls.push_back(std::move(c));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) out["tool_call_id"] = *m.tool_call_id;
  if (m.name) out["name"] = *m.name;
  if (m.reasoning_content) out["reasoning_content"] = *m.reasoning_content;
  return out;
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

// Msgpack that JSON cannot express (a map with non-string keys, say) is refused, typed, rather
// than stored in another shape.
std::string metadata_to_json(const std::string& packed) {
  try {
    return json_text(json::from_msgpack(packed));
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kProtocol, std::string("job field metadata: cannot be stored as JSON in Redis (") + e.what() + ")");
  }
}

std::string metadata_from_json(const std::string& text) {
  const std::vector<uint8_t> packed = json::to_msgpack(parse_json("metadata", text));
  const std::string bytes(packed.begin(), packed.end());  // the handle below refers to these
  msgpack::object_handle handle = protocol::unpack_body(bytes, "redis metadata");
  return protocol::read_raw(handle.get());
}

std::vector<std::string> job_to_fields(const protocol::Job& job) {
  std::vector<std::string> out;
  auto add = [&](const char* name, std::string value) {
    out.emplace_back(name);
    out.push_back(std::move(value));
  };
  if (!job.id.empty()) add("id", job.id);
  if (const auto* text = std::get_if<std::string>(&job.prompt)) {
    add("prompt", *text);
  } else if (const auto* ids = std::get_if<protocol::TokenIds>(&job.prompt)) {
    add("prompt_tokens", json_text(*ids));
  } else {
    json messages = json::array();
    for (const auto& m : std::get<std::vector<protocol::ChatMessage>>(job.prompt)) {
      messages.push_back(message_json(m));
    }
    add("messages", json_text(messages));
  }
  add("max_tokens", std::to_string(job.max_tokens));
  add("temperature", number_text(job.temperature));
  add("top_p", number_text(job.top_p));
  add("top_k", std::to_string(job.top_k));
  add("seed", std::to_string(job.seed));
  if (!job.stop.empty()) add("stop", json_text(job.stop));
  if (!job.stop_token_ids.empty()) add("stop_token_ids", json_text(job.stop_token_ids));
  add("priority", std::to_string(job.priority));
  add("deadline_ms", std::to_string(job.deadline_ms));
  add("spec", std::string(protocol::spec_mode_name(job.spec)));
  if (job.model) add("model", *job.model);
  if (job.session) add("session", *job.session);
  // Opaque msgpack travels as JSON here, so that Redis users can read it.
  if (job.metadata) add("metadata", metadata_to_json(*job.metadata));
  add("stream", job.stream ? "true" : "false");
  add("block_size", std::to_string(job.block_size));
  if (job.structured_output) add("structured_output", *job.structured_output);
  if (job.logprobs) add("logprobs", std::to_string(*job.logprobs));
  // Chat jobs only, as on the wire: tools and template options are JSON text already.
  if (std::holds_alternative<std::vector<protocol::ChatMessage>>(job.prompt)) {
    if (job.tools) add("tools", *job.tools);
    if (job.chat_template_kwargs) add("chat_template_kwargs", *job.chat_template_kwargs);
    add("add_generation_prompt", job.add_generation_prompt ? "true" : "false");
  }
  return out;
}

protocol::Job job_from_fields(const RedisFields& fields) {
  json map = json::object();
  for (const auto& [name, text] : fields) {
    if (name == "id" || name == "prompt" || name == "spec" || name == "model" || name == "session" ||
        name == "structured_output") {
      map[name] = text;
    } else if (name == "max_tokens" || name == "top_k" || name == "priority" || name == "deadline_ms" ||
               name == "block_size" || name == "logprobs") {
      map[name] = parse_integer<int64_t>(name, text);
    } else if (name == "seed") {
      map[name] = parse_integer<uint64_t>(name, text);
    } else if (name == "temperature" || name == "top_p") {
      map[name] = parse_double(name, text);
    } else if (name == "stream" || name == "add_generation_prompt") {
      if (text != "true" && text != "false" && text != "1" && text != "0") refuse(name, "must be true or false");
      map[name] = text == "true" || text == "1";
    } else if (name == "prompt_tokens" || name == "stop_token_ids" || name == "messages" || name == "metadata" ||
               name == "tools" || name == "chat_template_kwargs") {
      map[name] = parse_json(name, text);
    } else if (name == "stop") {
      if (nested_too_deep(text)) refuse(name, "nested deeper than " + std::to_string(protocol::kMaxDepth) + " levels");
      json value = json::parse(text, nullptr, false);
      map[name] = value.is_array() ? value : json::array({text});
    }
    // Other fields are ignored, as unknown keys are on the wire: producers may add their own.
  }
  const std::vector<uint8_t> packed = json::to_msgpack(map);
  const std::string bytes(packed.begin(), packed.end());
  msgpack::object_handle handle = protocol::unpack_body(bytes, "redis job");
  return protocol::read_job(protocol::FieldReader(handle.get(), protocol::FieldPath{"redis job", ""}),
                            protocol::JobIdRule::kOptional);
}

}  // namespace flashq
