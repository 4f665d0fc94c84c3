// POST /v1/chat/completions read into jobs: the messages as the job map's OpenAI-shaped messages,
// the tools and tool_choice handed to the chat template, and how the output is read back.
#include "gateway/openai/generation_request.h"
#include "gateway/openai/request_body.h"
#include "gateway/openai/shared_request_fields.h"
#include "gateway/openai/strict_tools.h"
#include "gateway/openai/structured_output_request.h"
#include "shared/error.h"
#include "shared/protocol/chat_fields.h"
#include "shared/protocol/limits.h"

namespace flashq::gateway {
namespace {

// Content as a string or an array of text parts (joined with "\n", as vLLM joins them). Other
// parts (images, audio, files) need a multimodal model: refused, naming the part.
std::string read_content_parts(const nlohmann::ordered_json& parts, const std::string& field) {
  std::string text;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    const std::string part_field = field + "[" + std::to_string(j) + "]";
    RequestBody part(parts[j], part_field);
    const std::string type = part.string("type").value_or("");
    if (type != "text") {
      if (type.empty()) throw invalid_request("'" + part_field + ".type' is required", part_field + ".type");
      throw unsupported_parameter(part_field + ".type", "content parts of type '" + type +
                                                            "' need a multimodal model; only text parts are read");
    }
    const nlohmann::ordered_json& part_text = part.require("text");
    if (!part_text.is_string())
      throw invalid_request("'" + part_field + ".text' must be a string", part_field + ".text");
    part.ignore("cache_control");  // a caching hint some clients add
    part.refuse_unread();
    if (j > 0) text += '\n';
    text += part_text.get<std::string>();
  }
  return text;
}

std::optional<std::string> read_content(RequestBody& message, const std::string& prefix) {
  const nlohmann::ordered_json* content = message.find("content");
  if (content == nullptr) return std::nullopt;
  if (content->is_string()) return content->get<std::string>();
  if (content->is_array()) return read_content_parts(*content, prefix + "content");
  throw invalid_request("'" + prefix + "content' must be a string or an array of content parts", prefix + "content",
                        "invalid_type");
}

std::vector<protocol::ToolCall> read_message_tool_calls(const nlohmann::ordered_json& calls, const std::string& field) {
  if (!calls.is_array()) throw invalid_request("'" + field + "' must be an array", field, "invalid_type");
  std::vector<protocol::ToolCall> out;
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const std::string call_field = field + "[" + std::to_string(k) + "]";
    RequestBody call(calls[k], call_field);
    protocol::ToolCall tool_call;
    tool_call.id = call.string("id").value_or("");
    const std::string type = call.string("type").value_or("function");
    if (type != "function") {
      throw unsupported_parameter(call_field + ".type", "only function tool calls are supported");
    }
    RequestBody function(call.require("function"), call_field + ".function");
    const std::optional<std::string> name = function.string("name");
    if (!name || name->empty()) {
      throw invalid_request("'" + call_field + ".function.name' must be a non-empty string",
                            call_field + ".function.name");
    }
    tool_call.name = *name;
    const nlohmann::ordered_json& arguments = function.require("arguments");
    // OpenAI's form is JSON text in a string; the job map takes it as that string.
    tool_call.arguments_json = arguments.dump();
    function.refuse_unread();
    call.refuse_unread();
    out.push_back(std::move(tool_call));
  }
  return out;
}

protocol::ChatMessage read_message(const nlohmann::ordered_json& value, std::size_t i) {
  const std::string prefix = "messages[" + std::to_string(i) + "].";
  RequestBody message(value, "messages[" + std::to_string(i) + "]");
  protocol::ChatMessage out;
  const std::optional<std::string> role = message.string("role");
  if (!role) throw invalid_request("'" + prefix + "role' is required", prefix + "role", "missing_required_parameter");
  // OpenAI's developer messages are what system messages were; chat templates know only system.
  out.role = *role == "developer" ? "system" : *role;
  if (out.role == "function") {
    throw unsupported_parameter(prefix + "role", "the deprecated 'function' role; send tool results with role 'tool'");
  }
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool") {
    throw invalid_request("'" + prefix + "role' must be one of system, developer, user, assistant, tool",
                          prefix + "role");
  }
  out.content = read_content(message, prefix);
  if (auto name = message.string("name")) out.name = name;
  if (out.role == "assistant") {
    if (const nlohmann::ordered_json* calls = message.find("tool_calls")) {
      out.tool_calls = read_message_tool_calls(*calls, prefix + "tool_calls");
    }
    // An assistant message as a chat completion returned it may be sent back whole: its reasoning
    // (vLLM's two names) goes to the template, the fields of a response that asks nothing are
    // accepted, and audio or a deprecated function_call are refused.
    std::optional<std::string> reasoning = message.string("reasoning_content");
    if (auto other = message.string("reasoning"); other && !reasoning) reasoning = other;
    if (reasoning && !reasoning->empty()) out.reasoning_content = reasoning;
    message.ignore("refusal");
    message.ignore("annotations");
    message.refuse("audio", "audio output is not supported");
    message.refuse("function_call", "the deprecated function_call; use tool_calls");
    if (!out.content && out.tool_calls.empty()) out.content = "";
  } else if (out.role == "tool") {
    const std::optional<std::string> call_id = message.string("tool_call_id");
    if (!call_id || call_id->empty()) {
      throw invalid_request("'" + prefix + "tool_call_id' is required in a tool message", prefix + "tool_call_id",
                            "missing_required_parameter");
    }
    out.tool_call_id = call_id;
  }
  if (!out.content && out.tool_calls.empty()) {
    throw invalid_request("'" + prefix + "content' is required", prefix + "content", "missing_required_parameter");
  }
  message.refuse_unread();
  return out;
}

// The tools as the template takes them; only function tools (custom tools have no format a
// chat template writes).
nlohmann::ordered_json read_tools(const nlohmann::ordered_json& tools) {
  if (!tools.is_array()) throw invalid_request("'tools' must be an array", "tools", "invalid_type");
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const std::string field = "tools[" + std::to_string(i) + "]";
    RequestBody tool(tools[i], field);
    const std::string type = tool.string("type").value_or("");
    if (type != "function") {
      throw unsupported_parameter(field + ".type", "only tools of type 'function' are supported");
    }
    RequestBody function(tool.require("function"), field + ".function");
    const std::optional<std::string> name = function.string("name");
    if (!name || name->empty()) {
      throw invalid_request("'" + field + ".function.name' must be a non-empty string", field + ".function.name");
    }
    function.string("description");
    if (const nlohmann::ordered_json* parameters = function.find("parameters");
        parameters && !parameters->is_object()) {
      throw invalid_request("'" + field + ".function.parameters' must be a JSON Schema object",
                            field + ".function.parameters");
    }
    function.boolean("strict");  // true: the calls are constrained (strict_tools.h)
    function.refuse_unread();
    tool.refuse_unread();
  }
  return tools;
}

const nlohmann::ordered_json* find_tool(const nlohmann::ordered_json& tools, const std::string& name) {
  for (const nlohmann::ordered_json& tool : tools) {
    if (tool["function"]["name"] == name) return &tool;
  }
  return nullptr;
}

// The fields of a chat completion request besides kSharedGenerationFields: read, refused
// (kRefusedChatFields), or accepted as hints that change nothing.
constexpr std::string_view kChatCompletionFields[] = {
    "messages", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs",
    "add_generation_prompt",
    "response_format", "logprobs", "top_logprobs",
    // Refused unless they ask for nothing.
    "audio", "modalities", "functions", "function_call",
    "prediction", "reasoning_effort", "verbosity", "web_search_options", "moderation", "store", "metadata",
    // Hints and identifiers that change nothing about the generation.
    "service_tier", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options"};

// Fields of OpenAI's request that ask for what flashq does not do, each with why.
const RefusedField kRefusedChatFields[] = {
    {"audio", nullptr, "audio output is not supported"},
    {"modalities", nlohmann::ordered_json::array({"text"}), "only text output is supported"},
    {"functions", nullptr, "the deprecated functions; use tools"},
    {"function_call", nullptr, "the deprecated function_call; use tool_choice"},
    {"prediction", nullptr, "predicted outputs are not supported"},
    {"reasoning_effort", nullptr,
     "reasoning is switched by the chat template, e.g. chat_template_kwargs {\"enable_thinking\": false}"},
    {"verbosity", nullptr, "verbosity is not supported"},
    {"web_search_options", nullptr, "web search is not supported"},
    {"moderation", nullptr, "moderation is not supported"},
    {"store", false, "stored completions are not supported"},
    {"metadata", nullptr, "metadata belongs to stored completions, which are not supported"},
};

// Tools: an empty array is no tools. With tool_choice none they are left out of the prompt (the
// model is not told of functions it may not call); with a named choice only that function is
// given (a strict one is also forced by the grammar: strict_tools.h). Sets the request's
// tool_choice and has_tools; returns the tools as the template takes them (none: nullopt).
std::optional<std::string> read_chat_tools(RequestBody& body, const ServedModel& model, GenerationRequest& request) {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  if (const nlohmann::ordered_json* given = body.find("tools")) tools = read_tools(*given);
  const nlohmann::ordered_json* tool_choice = body.find("tool_choice");
  try {
    request.tool_choice = parse_tool_choice(tool_choice ? *tool_choice : nlohmann::ordered_json(), !tools.empty());
  } catch (const Error& e) {
    throw invalid_request(e.what(), "tool_choice");
  }
  if (request.tool_choice.mode == ToolChoiceMode::kRequired && tools.empty()) {
    throw invalid_request("'tool_choice' is required, but the request has no tools", "tool_choice");
  }
  if (request.tool_choice.mode == ToolChoiceMode::kNamed) {
    const nlohmann::ordered_json* named = find_tool(tools, request.tool_choice.function_name);
    if (named == nullptr) {
      throw invalid_request(
          "'tool_choice' names the function '" + request.tool_choice.function_name + "', which is not among the tools",
          "tool_choice");
    }
    tools = nlohmann::ordered_json::array({*named});
  } else if (request.tool_choice.mode == ToolChoiceMode::kNone) {
    tools = nlohmann::ordered_json::array();
  }
  request.has_tools = !tools.empty();
  if (!request.has_tools) return std::nullopt;
  if (model.output_format.tool_calls == ToolCallFormat::kNone) {
    throw unsupported_parameter("tools", "no parser reads the tool calls of the model '" + request.model +
                                             "' (its chat template's format is not one flashq knows)");
  }
  return tools.dump();
}

// logprobs (a boolean) and top_logprobs (0..20, with logprobs true, as OpenAI requires it): the
// job's logprobs, the number of most likely tokens reported with each output token.
std::optional<std::int64_t> read_chat_logprobs(RequestBody& body) {
  const bool wanted = body.boolean("logprobs").value_or(false);
  const std::optional<std::int64_t> top = body.integer("top_logprobs", 0, protocol::kMaxTopLogprobs);
  if (top && *top > 0 && !wanted) {
    throw invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
  }
  if (!wanted) return std::nullopt;
  return top.value_or(0);
}

// chat_template_kwargs: the template's own variables, none of those the request itself gives.
// `thinking_off` when they turn thinking off (Qwen3's enable_thinking: false).
std::optional<std::string> read_template_kwargs(RequestBody& body, bool& thinking_off) {
  const nlohmann::ordered_json* kwargs = body.find("chat_template_kwargs");
  if (kwargs == nullptr) return std::nullopt;
  if (!kwargs->is_object()) throw invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
  for (const char* reserved : protocol::kReservedTemplateVariables) {
    if (kwargs->contains(reserved)) {
      throw invalid_request(
          std::string("'chat_template_kwargs' may not set '") + reserved + "': the request itself gives it",
          "chat_template_kwargs");
    }
  }
  const auto thinking = kwargs->find("enable_thinking");
  thinking_off = thinking != kwargs->end() && thinking->is_boolean() && !thinking->get<bool>();
  if (kwargs->empty()) return std::nullopt;
  return kwargs->dump();
}

}  // namespace

GenerationRequest read_chat_completion_request(const nlohmann::ordered_json& json, const ModelDirectory& models,
                                               const RequestExtensions& ext) {
  RequestBody body(json);
  GenerationRequest request;
  request.endpoint = Endpoint::kChatCompletions;
  const ServedModel& model = read_requested_model(body, models);
  request.model = body.require("model").get<std::string>();
  SharedFields fields = read_shared_fields(body, ext);
  if (auto max_completion_tokens = body.integer("max_completion_tokens", 1, protocol::kMaxMaxTokens)) {
    if (fields.max_tokens && *fields.max_tokens != *max_completion_tokens) {
      throw invalid_request("'max_tokens' and 'max_completion_tokens' are both given, with different values",
                            "max_completion_tokens", "conflicting_values");
    }
    fields.max_tokens = max_completion_tokens;
    fields.max_tokens_field = "max_completion_tokens";
  }
  body.refuse_all(kRefusedChatFields);

  protocol::Job job = fields.job;
  job.logprobs = read_chat_logprobs(body);
  const nlohmann::ordered_json& messages = body.require("messages");
  if (!messages.is_array() || messages.empty()) {
    throw invalid_request("'messages' must be a non-empty array of messages", "messages");
  }
  std::vector<protocol::ChatMessage> chat;
  for (std::size_t i = 0; i < messages.size(); ++i) chat.push_back(read_message(messages[i], i));
  job.prompt = std::move(chat);

  if (const nlohmann::ordered_json* format = body.find("response_format"); format && !format->is_null()) {
    std::optional<std::string> output = read_response_format(*format);
    if (output && job.structured_output) {
      throw invalid_request("'response_format' and a guided_* or structured_outputs field both ask for a structured output",
                            "response_format", "conflicting_values");
    }
    if (output) job.structured_output = std::move(output);
  }
  job.tools = read_chat_tools(body, model, request);
  request.parallel_tool_calls = body.boolean("parallel_tool_calls").value_or(true);

  bool thinking_off = false;
  job.chat_template_kwargs = read_template_kwargs(body, thinking_off);
  job.add_generation_prompt = body.boolean("add_generation_prompt").value_or(true);
  request.output_format = model.output_format;
  request.parse_reasoning = model.output_format.reasoning != ReasoningFormat::kNone;
  request.starts_in_reasoning = model.reasoning_opens_in_prompt && !thinking_off && job.add_generation_prompt;
  if (job.tools) {
    job.structured_output = constrain_tool_calls({.tools = chat_strict_tools(nlohmann::ordered_json::parse(*job.tools)),
                                                  .choice = request.tool_choice,
                                                  .format = model.output_format,
                                                  .parallel = request.parallel_tool_calls,
                                                  .starts_in_reasoning = request.starts_in_reasoning,
                                                  .thinking_off = thinking_off,
                                                  .answer = std::move(job.structured_output)},
                                                 "tools");
  }
  body.refuse_unknown(kSharedGenerationFields, kChatCompletionFields);

  job.model = request.model;
  // The rendered prompt's length is the worker's to know: the worker judges the context.
  job.max_tokens = max_tokens_for(fields, model, ext, std::nullopt, "messages");
  add_choice_jobs(fields, job, request.jobs);
  request.prompt_of_choice.assign(request.jobs.size(), 0);
  request.stream = fields.stream;
  request.include_usage = fields.include_usage;
  check_job_limits(request.jobs);
  return request;
}

}  // namespace flashq::gateway
