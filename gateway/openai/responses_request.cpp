// POST /v1/responses bodies read into jobs; the request recovered from a job's metadata.
#include "gateway/openai/responses_request.h"

#include <algorithm>
#include <set>

#include <msgpack.hpp>

#include "gateway/openai/api_error.h"
#include "gateway/openai/responses_input.h"
#include "gateway/openai/strict_tools.h"
#include "gateway/openai/structured_output_request.h"
#include "gateway/openai/shared_request_fields.h"
#include "shared/error.h"
#include "shared/protocol/chat_fields.h"
#include "shared/protocol/field_reader.h"
#include "shared/protocol/json_value.h"
#include "shared/protocol/limits.h"

namespace flashq::gateway {

namespace {

constexpr int kSettingsVersion = 1;

// OpenAI's limits on `metadata`: 16 pairs, keys up to 64 characters, values up to 512.
constexpr std::size_t kMaxMetadataPairs = 16;
constexpr std::size_t kMaxMetadataKey = 64;
constexpr std::size_t kMaxMetadataValue = 512;

std::string dump(const ResponsesJson& value) {
  return value.dump(-1, ' ', false, ResponsesJson::error_handler_t::replace);
}

constexpr BodyDialect kDialect = BodyDialect::kResponses;

// The fields of a request body: OpenAI's ResponseCreateParams, and the extension
// chat_template_kwargs. Any other is refused by name.
constexpr std::string_view kResponsesFields[] = {
    "model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "temperature", "top_p",
    "parallel_tool_calls", "metadata", "store", "background", "stream", "stream_options", "include", "truncation",
    "reasoning", "text", "user", "safety_identifier", "previous_response_id", "conversation", "prompt",
    "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "service_tier", "top_logprobs",
    "max_tool_calls", "context_management", "moderation", "chat_template_kwargs"};
constexpr std::string_view kFunctionToolFields[] = {"type", "name", "description", "parameters", "strict"};
constexpr std::string_view kToolChoiceFields[] = {"type", "name"};
constexpr std::string_view kReasoningFields[] = {"effort", "summary", "generate_summary", "context"};
constexpr std::string_view kTextFields[] = {"format", "verbosity"};
constexpr std::string_view kTextFormatFields[] = {"type", "name", "schema", "strict", "description"};
constexpr std::string_view kStreamOptionsFields[] = {"include_obfuscation"};

// Fields that OpenAI defines and flashq serves only absent (or null), each with why.
const RefusedField kRefusedFields[] = {
    {"previous_response_id", nullptr, "send the conversation's items in 'input'"},
    {"conversation", nullptr, "send the conversation's items in 'input'"},
    {"prompt", nullptr, "stored prompt templates are not served"},
    {"prompt_cache_retention", nullptr, "no prompt cache is kept between responses"},
    {"prompt_cache_options", nullptr, "no prompt cache is kept between responses"},
    {"max_tool_calls", nullptr, "the number of tool calls is not limited"},
    {"context_management", nullptr, "the context is not compacted"},
    {"moderation", nullptr, "no moderation model is served"},
};

ResponsesJson read_metadata(RequestBody& body) {
  const ResponsesJson* value = body.object("metadata");
  if (!value) return ResponsesJson::object();
  if (value->size() > kMaxMetadataPairs) {
    throw invalid_request("'metadata' holds more than 16 pairs", "metadata");
  }
  for (const auto& [key, item] : value->items()) {
    const std::string path = field_path("metadata", key);
    if (key.size() > kMaxMetadataKey) throw invalid_request("a 'metadata' key is longer than 64 characters", path);
    if (string_value(item, path, kDialect).size() > kMaxMetadataValue) {
      throw invalid_request("'" + path + "' is longer than 512 characters", path);
    }
  }
  return *value;
}

// One function tool: appended as the response object echoes it to `echo` and as chat templates
// take it (OpenAI's chat form) to `template_tools`.
void read_tool(RequestBody& tool, std::set<std::string>& names, ResponsesJson& echo, ResponsesJson& template_tools) {
  const std::string type = tool.require_string("type");
  if (type != "function") {
    throw unsupported_parameter(tool.field("type"), "only function tools are served ('" + type + "')");
  }
  tool.refuse_unknown(kFunctionToolFields);
  const std::string name = tool.require_string("name");
  if (name.empty()) throw invalid_request("'" + tool.field("name") + "' is empty", tool.field("name"));
  if (!names.insert(name).second) throw invalid_request("two tools are named '" + name + "'", tool.field("name"));

  ResponsesJson function = {{"name", name}};
  ResponsesJson echoed = {{"type", "function"}, {"name", name}};
  if (std::optional<std::string> description = tool.string("description")) function["description"] = *description;
  echoed["description"] = function.contains("description") ? function["description"] : ResponsesJson();
  if (const ResponsesJson* parameters = tool.object("parameters")) function["parameters"] = *parameters;
  echoed["parameters"] = function.contains("parameters") ? function["parameters"] : ResponsesJson();
  // OpenAI's default is strict: the calls are constrained (strict_tools.h).
  echoed["strict"] = tool.boolean("strict").value_or(true);
  echo.push_back(std::move(echoed));
  template_tools.push_back({{"type", "function"}, {"function", std::move(function)}});
}

// tools: function tools only. Returns the tools as the response object echoes them and, in
// `template_tools`, as chat templates take them.
ResponsesJson read_tools(RequestBody& body, ResponsesJson& template_tools) {
  ResponsesJson echo = ResponsesJson::array();
  template_tools = ResponsesJson::array();
  const ResponsesJson* tools = body.array("tools");
  if (!tools) return echo;
  std::set<std::string> names;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    RequestBody tool((*tools)[i], element_path("tools", i), kDialect);
    read_tool(tool, names, echo, template_tools);
  }
  return echo;
}

// tool_choice in the Responses form ("none" | "auto" | "required" | {type: function, name}),
// checked against the tools; returns the parsed choice.
ToolChoice read_tool_choice(const ResponsesJson* value, const std::set<std::string>& tool_names) {
  const bool has_tools = !tool_names.empty();
  nlohmann::json chat_form;  // tool_choice.h reads the chat completions form
  if (value) {
    if (value->is_object()) {
      const ResponsesJson* type = value->contains("type") ? &value->at("type") : nullptr;
      const std::string kind = type && type->is_string() ? type->get<std::string>() : "";
      if (kind != "function") {
        throw unsupported_parameter("tool_choice", "only none, auto, required and {\"type\": \"function\", \"name\"} are served");
      }
      RequestBody choice(*value, "tool_choice", kDialect);
      choice.refuse_unknown(kToolChoiceFields);
      chat_form = {{"type", "function"}, {"function", {{"name", choice.require_string("name")}}}};
    } else if (value->is_string()) {
      chat_form = value->get<std::string>();
    } else {
      throw invalid_request("'tool_choice' must be a string or an object", "tool_choice", "invalid_type");
    }
  }
  ToolChoice choice;
  try {
    choice = parse_tool_choice(chat_form, has_tools);
  } catch (const Error& error) {
    throw invalid_request(error.what(), "tool_choice");
  }
  if (choice.mode == ToolChoiceMode::kRequired && !has_tools) {
    throw invalid_request("tool_choice is 'required' but the request has no tools", "tool_choice");
  }
  if (choice.mode == ToolChoiceMode::kNamed && !tool_names.count(choice.function_name)) {
    throw invalid_request("tool_choice names '" + choice.function_name + "', which is not among the tools",
                          "tool_choice.name");
  }
  return choice;
}

// reasoning: {effort, summary}. The effort reaches the chat template (docs/gateway.md).
ResponsesJson read_reasoning(RequestBody& body, ResponsesJson& template_kwargs) {
  ResponsesJson echo = {{"effort", nullptr}, {"summary", nullptr}};
  const ResponsesJson* value = body.find("reasoning");
  if (!value) return echo;
  RequestBody reasoning(*value, "reasoning", kDialect);
  reasoning.refuse_unknown(kReasoningFields);
  if (const std::optional<std::string> level = reasoning.string("effort")) {
    static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    if (!kEfforts.count(*level)) throw invalid_request("'reasoning.effort' '" + *level + "' is not an effort level", "reasoning.effort");
    echo["effort"] = *level;
    if (!template_kwargs.contains("reasoning_effort")) template_kwargs["reasoning_effort"] = *level;
    if (*level == "none" && !template_kwargs.contains("enable_thinking")) template_kwargs["enable_thinking"] = false;
  }
  for (const char* key : {"summary", "generate_summary"}) {
    if (const std::optional<std::string> summary = reasoning.string(key)) {
      if (*summary != "auto") {
        throw unsupported_parameter(reasoning.field(key), "no reasoning summary is written; the reasoning itself is returned as reasoning_text");
      }
      echo["summary"] = "auto";
    }
  }
  if (reasoning.find("context")) throw unsupported_parameter("reasoning.context", "reasoning is not carried between responses");
  return echo;
}

// text: its format (text, or a structured output: `structured_output` set, the format echoed as
// given) and verbosity.
ResponsesJson read_text_config(RequestBody& body, std::optional<std::string>& structured_output) {
  ResponsesJson echo_format = {{"type", "text"}};
  if (const ResponsesJson* value = body.find("text")) {
    RequestBody text(*value, "text", kDialect);
    text.refuse_unknown(kTextFields);
    if (const ResponsesJson* format_value = text.find("format")) {
      RequestBody format(*format_value, "text.format", kDialect);
      format.refuse_unknown(kTextFormatFields);
      structured_output = read_text_format(*format_value, "text.format");
      if (structured_output) echo_format = *format_value;
    }
    if (const std::optional<std::string> verbosity = text.string("verbosity"); verbosity && *verbosity != "medium") {
      throw unsupported_parameter("text.verbosity", "the models served have no verbosity control");
    }
  }
  return {{"format", std::move(echo_format)}, {"verbosity", "medium"}};
}

// include: returns whether it asks for the output text's log-probabilities.
bool read_include(RequestBody& body) {
  const ResponsesJson* include = body.array("include");
  if (!include) return false;
  bool logprobs = false;
  for (std::size_t i = 0; i < include->size(); ++i) {
    const std::string& what = string_value((*include)[i], element_path("include", i), kDialect);
    // Reasoning is always returned in the clear (reasoning_text), so asking for it sealed asks
    // for nothing more; every other inclusion names output flashq does not produce.
    if (what == "message.output_text.logprobs") {
      logprobs = true;
    } else if (what != "reasoning.encrypted_content") {
      throw unsupported_parameter("include", "'" + what + "' is not produced");
    }
  }
  return logprobs;
}

// include "message.output_text.logprobs" and top_logprobs (0..20): the job's logprobs. Either
// asks for them (a top_logprobs above 0 alone too, as vLLM reads it); echoed as top_logprobs.
std::optional<std::int64_t> read_logprobs(RequestBody& body, ResponsesJson& echo) {
  const bool included = read_include(body);
  const std::optional<std::int64_t> top = body.integer("top_logprobs", 0, protocol::kMaxTopLogprobs);
  if (!included && top.value_or(0) == 0) return std::nullopt;
  echo["top_logprobs"] = top.value_or(0);
  return top.value_or(0);
}

double read_range(RequestBody& body, const char* key, double low, double high, double fallback) {
  const std::optional<double> number = body.number(key);
  if (!number) return fallback;
  if (!(*number >= low && *number <= high)) {
    throw invalid_request("'" + std::string(key) + "' must be between " + dump(low) + " and " + dump(high), key);
  }
  return *number;
}

ToolCallFormat tool_call_format_named(const std::string& name) {
  for (ToolCallFormat format :
       {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kHarmony}) {
    if (tool_call_format_name(format) == name) return format;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown tool-call format '" + name + "'");
}

ReasoningFormat reasoning_format_named(const std::string& name) {
  for (ReasoningFormat format : {ReasoningFormat::kNone, ReasoningFormat::kThinkTags, ReasoningFormat::kThinkInPrompt,
                                 ReasoningFormat::kHarmony}) {
    if (reasoning_format_name(format) == name) return format;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown reasoning format '" + name + "'");
}

// The job's metadata: one msgpack map (see the header).
std::string encode_settings(const ResponsesRequest& request) {
  const ResponseSettings& s = request.settings;
  const ResponsesJson stored = {{"flashq_responses", kSettingsVersion},
                                {"echo", s.echo},
                                {"stream", request.stream},
                                {"tool_calls", tool_call_format_name(s.output_format.tool_calls)},
                                {"reasoning", reasoning_format_name(s.output_format.reasoning)},
                                {"starts_in_reasoning", s.starts_in_reasoning},
                                {"created_at", request.created_at}};
  // Packed once more by the same msgpack library the broker and Redis use to pass the job on,
  // so the bytes (nlohmann packs 1.0 as a float32, msgpack-c repacks it otherwise) are the same
  // in the job as submitted and in the job as given back.
  const std::string packed = protocol::pack_json_text(dump(stored), "the response's job metadata");
  const msgpack::object_handle handle = msgpack::unpack(packed.data(), packed.size());
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, handle.get());
  return std::string(buffer.data(), buffer.size());
}

// The settings the echo and the stored formats imply: the same reads as the request's, so a
// recovered request equals the one read from the body.
ResponseSettings settings_from(const std::string& model, const ResponsesJson& echo, OutputFormat format,
                               bool starts_in_reasoning) {
  ResponseSettings s;
  s.model = model;
  s.echo = echo;
  s.output_format = format;
  s.starts_in_reasoning = starts_in_reasoning;
  std::set<std::string> names;
  for (const ResponsesJson& tool : echo.at("tools")) names.insert(tool.at("name").get<std::string>());
  s.tool_choice = read_tool_choice(&echo.at("tool_choice"), names);
  s.parse_tool_calls = !names.empty() && parses_tool_calls(s.tool_choice);
  return s;
}

// model: present, a string, and served (404 model_not_found otherwise). Returns the directory's entry.
const ModelDirectory::value_type& read_model(RequestBody& body, const ModelDirectory& models) {
  const std::string model = body.require_string("model");
  const auto served = models.find(model);
  if (served == models.end()) {
    throw ApiError(404, "invalid_request_error", "model_not_found",
                   "The model '" + model + "' does not exist or no worker serves it", "model");
  }
  return *served;
}

// The fields served only in their neutral value, and the hints accepted as they are.
void refuse_unserved_fields(RequestBody& body) {
  body.refuse_all(kRefusedFields);
  if (const std::optional<std::string> tier = body.string("service_tier")) {
    if (*tier != "auto" && *tier != "default") throw unsupported_parameter("service_tier", "use the job's priority instead");
  }
  body.string("prompt_cache_key");
  if (const std::optional<std::string> truncation = body.string("truncation"); truncation && *truncation != "disabled") {
    throw unsupported_parameter("truncation", "an input longer than the context is refused, not cut");
  }
}

// stream, background, store and stream_options: how the endpoint answers.
void read_answer_mode(RequestBody& body, ResponsesRequest& request) {
  request.stream = body.boolean("stream").value_or(false);
  request.background = body.boolean("background").value_or(false);
  request.store = body.boolean("store").value_or(true);
  if (const ResponsesJson* value = body.find("stream_options")) {
    RequestBody stream_options(*value, "stream_options", kDialect);
    stream_options.refuse_unknown(kStreamOptionsFields);
    stream_options.boolean("include_obfuscation");  // no padding is written either way
    if (!request.stream) throw invalid_request("'stream_options' is only allowed with 'stream': true", "stream_options");
  }
}

ResponsesJson read_template_kwargs(RequestBody& body) {
  const ResponsesJson* kwargs = body.object("chat_template_kwargs");
  if (!kwargs) return ResponsesJson::object();
  for (const char* reserved : protocol::kReservedTemplateVariables) {
    if (kwargs->contains(reserved)) {
      throw invalid_request("'chat_template_kwargs' may not set '" + std::string(reserved) + "'", "chat_template_kwargs");
    }
  }
  return *kwargs;
}

// tools, tool_choice and parallel_tool_calls into the echo; the tools as templates take them
// into `template_tools`.
void read_tool_fields(RequestBody& body, const ModelDirectory::value_type& model, ResponsesJson& echo,
                      ResponsesJson& template_tools) {
  echo["tools"] = read_tools(body, template_tools);
  if (!echo["tools"].empty() && model.second.output_format.tool_calls == ToolCallFormat::kNone) {
    throw unsupported_parameter("tools", "no parser reads the tool calls of model '" + model.first + "'");
  }
  std::set<std::string> tool_names;
  for (const ResponsesJson& tool : echo["tools"]) tool_names.insert(tool["name"].get<std::string>());
  const ResponsesJson* tool_choice = body.find("tool_choice");
  read_tool_choice(tool_choice, tool_names);  // checked here, kept in the echo
  echo["tool_choice"] = tool_choice ? *tool_choice : ResponsesJson("auto");
  echo["parallel_tool_calls"] = body.boolean("parallel_tool_calls").value_or(true);
}

struct Sampling {
  std::int64_t max_tokens = kDefaultMaxOutputTokens;
  double temperature = 1;
  double top_p = 1;
};

// max_output_tokens, temperature and top_p into the echo, and as the job samples.
Sampling read_sampling(RequestBody& body, const ModelDirectory::value_type& model, ResponsesJson& echo) {
  const std::int64_t context = model.second.max_model_len;
  Sampling sampling;
  if (context > 0) sampling.max_tokens = std::min(sampling.max_tokens, std::max<std::int64_t>(1, context / 2));
  if (const std::optional<std::int64_t> max_tokens = body.integer("max_output_tokens")) {
    sampling.max_tokens = *max_tokens;
    if (*max_tokens < 1) throw invalid_request("'max_output_tokens' must be at least 1", "max_output_tokens");
    if (context > 0 && *max_tokens >= context) {
      throw invalid_request("'max_output_tokens' (" + std::to_string(*max_tokens) + ") leaves no room for the input in model '" +
                                model.first + "''s context of " + std::to_string(context) + " tokens",
                            "max_output_tokens");
    }
    echo["max_output_tokens"] = *max_tokens;
  } else {
    echo["max_output_tokens"] = nullptr;
  }
  sampling.temperature = read_range(body, "temperature", 0, 2, 1);
  sampling.top_p = read_range(body, "top_p", 0, 1, 1);
  if (sampling.top_p == 0) throw invalid_request("'top_p' must be greater than 0", "top_p");
  echo["temperature"] = sampling.temperature;
  echo["top_p"] = sampling.top_p;
  return sampling;
}

// Whether the template's variables turn thinking off (Qwen3's enable_thinking: false).
bool thinking_off(const ResponsesJson& template_kwargs) {
  const auto enable_thinking = template_kwargs.find("enable_thinking");
  return enable_thinking != template_kwargs.end() && enable_thinking->is_boolean() && !enable_thinking->get<bool>();
}

}  // namespace

ResponsesRequest read_responses_request(const ResponsesJson& json, const ModelDirectory& models,
                                        const ResponsesJobOptions& options) {
  RequestBody body(json, "", kDialect);
  body.refuse_unknown(kResponsesFields);
  const ModelDirectory::value_type& model = read_model(body, models);
  refuse_unserved_fields(body);

  ResponsesRequest request;
  request.model = model.first;
  request.created_at = options.created_at;
  read_answer_mode(body, request);
  const std::optional<std::string> instructions = body.string("instructions");
  const ResponsesJson& input = body.require("input");
  ResponsesJson template_kwargs = read_template_kwargs(body);

  // The echo's keys in the order the response object shows them.
  ResponsesJson echo = {{"model", model.first},
                        {"instructions", instructions ? ResponsesJson(*instructions) : ResponsesJson()}};
  ResponsesJson template_tools;
  read_tool_fields(body, model, echo, template_tools);
  const Sampling sampling = read_sampling(body, model, echo);
  const std::optional<std::int64_t> logprobs = read_logprobs(body, echo);
  echo["metadata"] = read_metadata(body);
  echo["reasoning"] = read_reasoning(body, template_kwargs);
  std::optional<std::string> structured_output;
  echo["text"] = read_text_config(body, structured_output);
  echo["truncation"] = "disabled";
  echo["store"] = request.store;
  echo["background"] = request.background;
  const std::optional<std::string> user = body.string("user");
  if (user) echo["user"] = *user;
  if (const std::optional<std::string> id = body.string("safety_identifier")) echo["safety_identifier"] = *id;
  request.settings = settings_from(model.first, echo, model.second.output_format,
                                   model.second.reasoning_opens_in_prompt && !thinking_off(template_kwargs));

  protocol::Job& job = request.job;
  job.prompt = read_responses_input(input, instructions);
  job.model = model.first;
  job.stream = true;
  job.max_tokens = sampling.max_tokens;
  job.temperature = sampling.temperature;
  job.top_p = sampling.top_p;
  job.priority = options.priority;
  job.deadline_ms = options.deadline_ms;
  job.session = read_session(options.session, user);
  if (!template_tools.empty()) job.tools = dump(template_tools);
  if (!template_kwargs.empty()) job.chat_template_kwargs = dump(template_kwargs);
  job.structured_output = constrain_tool_calls({.tools = responses_strict_tools(echo.at("tools")),
                                                .choice = request.settings.tool_choice,
                                                .format = model.second.output_format,
                                                .parallel = echo.at("parallel_tool_calls").get<bool>(),
                                                .starts_in_reasoning = request.settings.starts_in_reasoning,
                                                .thinking_off = thinking_off(template_kwargs),
                                                .answer = std::move(structured_output)},
                                               "tools");
  job.logprobs = logprobs;
  job.metadata = encode_settings(request);
  // What the job map refuses (a tool name over its bound, say) is this request's 400, not the
  // broker's refusal of the job.
  check_job_limits({job});
  // The settings as any gateway reads them back from the job (msgpack writes 1.0 as 1, for
  // one), so the renderer of the first stream and that of a resumed one write the same bytes.
  request.settings = recover_responses_request(job).settings;
  return request;
}

ResponsesRequest recover_responses_request(const protocol::Job& job) {
  auto not_a_response = [&]() {
    return ApiError(404, "invalid_request_error", "response_not_found",
                    "No response with id '" + job.id + "' was found", "response_id");
  };
  if (!job.metadata) throw not_a_response();
  ResponsesJson stored;
  try {
    const msgpack::object_handle handle = msgpack::unpack(job.metadata->data(), job.metadata->size());
    stored = ResponsesJson::parse(protocol::read_json_text(handle.get(), protocol::FieldPath{"job", "metadata"}));
  } catch (const std::exception&) {
    throw not_a_response();  // another producer's metadata, not JSON-like
  }
  try {
    if (!stored.is_object() || stored.at("flashq_responses").get<int>() != kSettingsVersion) throw not_a_response();
    ResponsesRequest request;
    // A job known only by its id and metadata (a broker's STATUS_REPLY) names its model in the echo.
    request.model = job.model ? *job.model : stored.at("echo").at("model").get<std::string>();
    request.job = job;
    request.job.model = request.model;
    request.stream = stored.at("stream").get<bool>();
    request.created_at = stored.at("created_at").get<std::int64_t>();
    const ResponsesJson& echo = stored.at("echo");
    request.background = echo.at("background").get<bool>();
    request.store = echo.at("store").get<bool>();
    const OutputFormat format{tool_call_format_named(stored.at("tool_calls").get<std::string>()),
                              reasoning_format_named(stored.at("reasoning").get<std::string>())};
    request.settings = settings_from(request.model, echo, format, stored.at("starts_in_reasoning").get<bool>());
    return request;
  } catch (const ApiError&) {
    throw not_a_response();
  } catch (const std::exception&) {
    throw not_a_response();
  }
}

}  // namespace flashq::gateway
