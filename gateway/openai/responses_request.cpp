// POST /v1/responses bodies read into jobs; the request recovered from a job's metadata.
#include "gateway/openai/responses_request.h"

#include <algorithm>
#include <set>

#include <msgpack.hpp>

#include "gateway/openai/api_error.h"
#include "gateway/openai/responses_input.h"
#include "gateway/openai/shared_request_fields.h"
#include "shared/error.h"
#include "shared/protocol/chat_fields.h"
#include "shared/protocol/field_reader.h"
#include "shared/protocol/json_value.h"

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

// Fields that OpenAI defines and flashq serves only in their neutral value (null, or the one
// value that asks for nothing): anything else is named, never ignored.
void refuse_unless_null(const ResponsesJson& body, std::string_view key, const std::string& why) {
  if (optional_field(body, key)) throw unsupported_parameter(std::string(key), why);
}

ResponsesJson read_metadata(const ResponsesJson& value) {
  as_object(value, "metadata");
  if (value.size() > kMaxMetadataPairs) {
    throw invalid_request("'metadata' holds more than 16 pairs", "metadata");
  }
  for (const auto& [key, item] : value.items()) {
    const std::string path = field_path("metadata", key);
    if (key.size() > kMaxMetadataKey) throw invalid_request("a 'metadata' key is longer than 64 characters", path);
    if (as_string(item, path).size() > kMaxMetadataValue) {
      throw invalid_request("'" + path + "' is longer than 512 characters", path);
    }
  }
  return value;
}

// tools: function tools only. Returns the tools as the response object echoes them and, in
// `template_tools`, as chat templates take them (OpenAI's chat form).
ResponsesJson read_tools(const ResponsesJson& value, ResponsesJson& template_tools) {
  as_array(value, "tools");
  ResponsesJson echo = ResponsesJson::array();
  template_tools = ResponsesJson::array();
  std::set<std::string> names;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string at = element_path("tools", i);
    const ResponsesJson& tool = as_object(value[i], at);
    const ResponsesJson* type = optional_field(tool, "type");
    if (!type) throw invalid_request("'" + at + ".type' is required", at + ".type", "missing_required_parameter");
    if (as_string(*type, at + ".type") != "function") {
      throw unsupported_parameter(at + ".type", "only function tools are served ('" + type->get<std::string>() + "')");
    }
    check_known_fields(tool, {"type", "name", "description", "parameters", "strict"}, at);
    const ResponsesJson* name_value = optional_field(tool, "name");
    if (!name_value) throw invalid_request("'" + at + ".name' is required", at + ".name", "missing_required_parameter");
    const std::string& name = as_string(*name_value, at + ".name");
    if (name.empty()) throw invalid_request("'" + at + ".name' is empty", at + ".name");
    if (!names.insert(name).second) throw invalid_request("two tools are named '" + name + "'", at + ".name");

    ResponsesJson function = {{"name", name}};
    ResponsesJson echoed = {{"type", "function"}, {"name", name}};
    if (const ResponsesJson* description = optional_field(tool, "description")) {
      function["description"] = as_string(*description, at + ".description");
    }
    echoed["description"] = function.contains("description") ? function["description"] : ResponsesJson();
    if (const ResponsesJson* parameters = optional_field(tool, "parameters")) {
      function["parameters"] = as_object(*parameters, at + ".parameters");
    }
    echoed["parameters"] = function.contains("parameters") ? function["parameters"] : ResponsesJson();
    // OpenAI's default is strict; flashq has no constrained decoding, so strict is echoed as
    // sent and the model's arguments are returned as it wrote them (docs/gateway.md).
    const ResponsesJson* strict = optional_field(tool, "strict");
    echoed["strict"] = strict ? as_bool(*strict, at + ".strict") : true;
    echo.push_back(std::move(echoed));
    template_tools.push_back({{"type", "function"}, {"function", std::move(function)}});
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
      const ResponsesJson* type = optional_field(*value, "type");
      const std::string kind = type && type->is_string() ? type->get<std::string>() : "";
      if (kind != "function") {
        throw unsupported_parameter("tool_choice", "only none, auto, required and {\"type\": \"function\", \"name\"} are served");
      }
      check_known_fields(*value, {"type", "name"}, "tool_choice");
      const ResponsesJson* name = optional_field(*value, "name");
      if (!name) throw invalid_request("'tool_choice.name' is required", "tool_choice.name", "missing_required_parameter");
      chat_form = {{"type", "function"}, {"function", {{"name", as_string(*name, "tool_choice.name")}}}};
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
ResponsesJson read_reasoning(const ResponsesJson& value, ResponsesJson& template_kwargs) {
  as_object(value, "reasoning");
  check_known_fields(value, {"effort", "summary", "generate_summary", "context"}, "reasoning");
  ResponsesJson echo = {{"effort", nullptr}, {"summary", nullptr}};
  if (const ResponsesJson* effort = optional_field(value, "effort")) {
    static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    const std::string& level = as_string(*effort, "reasoning.effort");
    if (!kEfforts.count(level)) throw invalid_request("'reasoning.effort' '" + level + "' is not an effort level", "reasoning.effort");
    echo["effort"] = level;
    if (!template_kwargs.contains("reasoning_effort")) template_kwargs["reasoning_effort"] = level;
    if (level == "none" && !template_kwargs.contains("enable_thinking")) template_kwargs["enable_thinking"] = false;
  }
  for (const char* key : {"summary", "generate_summary"}) {
    if (const ResponsesJson* summary = optional_field(value, key)) {
      const std::string path = std::string("reasoning.") + key;
      if (as_string(*summary, path) != "auto") {
        throw unsupported_parameter(path, "no reasoning summary is written; the reasoning itself is returned as reasoning_text");
      }
      echo["summary"] = "auto";
    }
  }
  if (optional_field(value, "context")) throw unsupported_parameter("reasoning.context", "reasoning is not carried between responses");
  return echo;
}

ResponsesJson read_text_config(const ResponsesJson& value) {
  as_object(value, "text");
  check_known_fields(value, {"format", "verbosity"}, "text");
  if (const ResponsesJson* format = optional_field(value, "format")) {
    as_object(*format, "text.format");
    const ResponsesJson* type = optional_field(*format, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text") {
      throw unsupported_parameter("text.format", "structured output (json_schema, json_object) needs constrained decoding");
    }
    check_known_fields(*format, {"type"}, "text.format");
  }
  if (const ResponsesJson* verbosity = optional_field(value, "verbosity")) {
    if (as_string(*verbosity, "text.verbosity") != "medium") {
      throw unsupported_parameter("text.verbosity", "the models served have no verbosity control");
    }
  }
  return {{"format", {{"type", "text"}}}, {"verbosity", "medium"}};
}

void read_include(const ResponsesJson& value) {
  as_array(value, "include");
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string& what = as_string(value[i], element_path("include", i));
    // Reasoning is always returned in the clear (reasoning_text), so asking for it sealed asks
    // for nothing more; every other inclusion names output flashq does not produce.
    if (what != "reasoning.encrypted_content") {
      throw unsupported_parameter("include", "'" + what + "' is not produced");
    }
  }
}

double read_range(const ResponsesJson* value, const char* key, double low, double high, double fallback) {
  if (!value) return fallback;
  const double number = as_number(*value, key);
  if (!(number >= low && number <= high)) {
    throw invalid_request("'" + std::string(key) + "' must be between " + dump(low) + " and " + dump(high), key);
  }
  return number;
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

}  // namespace

ResponsesRequest read_responses_request(const ResponsesJson& body, const ModelDirectory& models,
                                        const ResponsesJobOptions& options) {
  if (!body.is_object()) throw invalid_request("the request body must be a JSON object", std::nullopt, "invalid_type");
  check_known_fields(body,
                     {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "temperature",
                      "top_p", "parallel_tool_calls", "metadata", "store", "background", "stream", "stream_options",
                      "include", "truncation", "reasoning", "text", "user", "safety_identifier",
                      "previous_response_id", "conversation", "prompt", "prompt_cache_key", "prompt_cache_retention",
                      "prompt_cache_options", "service_tier", "top_logprobs", "max_tool_calls", "context_management",
                      "moderation", "chat_template_kwargs"},
                     "");
  const ResponsesJson* model_value = optional_field(body, "model");
  if (!model_value) throw invalid_request("'model' is required", "model", "missing_required_parameter");
  const std::string& model = as_string(*model_value, "model");
  const auto served = models.find(model);
  if (served == models.end()) {
    throw ApiError(404, "invalid_request_error", "model_not_found",
                   "The model '" + model + "' does not exist or no worker serves it", "model");
  }

  refuse_unless_null(body, "previous_response_id", "send the conversation's items in 'input'");
  refuse_unless_null(body, "conversation", "send the conversation's items in 'input'");
  refuse_unless_null(body, "prompt", "stored prompt templates are not served");
  refuse_unless_null(body, "prompt_cache_retention", "no prompt cache is kept between responses");
  refuse_unless_null(body, "prompt_cache_options", "no prompt cache is kept between responses");
  refuse_unless_null(body, "max_tool_calls", "the number of tool calls is not limited");
  refuse_unless_null(body, "context_management", "the context is not compacted");
  refuse_unless_null(body, "moderation", "no moderation model is served");
  if (const ResponsesJson* logprobs = optional_field(body, "top_logprobs"); logprobs && as_integer(*logprobs, "top_logprobs") != 0) {
    throw unsupported_parameter("top_logprobs", "log probabilities are not returned");
  }
  if (const ResponsesJson* tier = optional_field(body, "service_tier")) {
    const std::string& name = as_string(*tier, "service_tier");
    if (name != "auto" && name != "default") throw unsupported_parameter("service_tier", "use the job's priority instead");
  }
  if (const ResponsesJson* key = optional_field(body, "prompt_cache_key")) as_string(*key, "prompt_cache_key");
  if (const ResponsesJson* truncation = optional_field(body, "truncation")) {
    if (as_string(*truncation, "truncation") != "disabled") {
      throw unsupported_parameter("truncation", "an input longer than the context is refused, not cut");
    }
  }
  if (const ResponsesJson* include = optional_field(body, "include")) read_include(*include);

  ResponsesRequest request;
  request.model = model;
  request.created_at = options.created_at;
  const ResponsesJson* stream = optional_field(body, "stream");
  request.stream = stream && as_bool(*stream, "stream");
  const ResponsesJson* background = optional_field(body, "background");
  request.background = background && as_bool(*background, "background");
  const ResponsesJson* store = optional_field(body, "store");
  request.store = !store || as_bool(*store, "store");
  if (const ResponsesJson* stream_options = optional_field(body, "stream_options")) {
    as_object(*stream_options, "stream_options");
    check_known_fields(*stream_options, {"include_obfuscation"}, "stream_options");
    if (const ResponsesJson* obfuscation = optional_field(*stream_options, "include_obfuscation")) {
      as_bool(*obfuscation, "stream_options.include_obfuscation");  // no padding is written either way
    }
    if (!request.stream) throw invalid_request("'stream_options' is only allowed with 'stream': true", "stream_options");
  }

  std::optional<std::string> instructions;
  if (const ResponsesJson* value = optional_field(body, "instructions")) instructions = as_string(*value, "instructions");
  const ResponsesJson* input = optional_field(body, "input");
  if (!input) throw invalid_request("'input' is required", "input", "missing_required_parameter");

  ResponsesJson template_kwargs = ResponsesJson::object();
  if (const ResponsesJson* kwargs = optional_field(body, "chat_template_kwargs")) {
    template_kwargs = as_object(*kwargs, "chat_template_kwargs");
    for (const char* reserved : protocol::kReservedTemplateVariables) {
      if (template_kwargs.contains(reserved)) {
        throw invalid_request("'chat_template_kwargs' may not set '" + std::string(reserved) + "'", "chat_template_kwargs");
      }
    }
  }

  ResponsesJson echo = ResponsesJson::object();
  echo["model"] = model;
  echo["instructions"] = instructions ? ResponsesJson(*instructions) : ResponsesJson();
  ResponsesJson template_tools;
  const ResponsesJson* tools_value = optional_field(body, "tools");
  echo["tools"] = tools_value ? read_tools(*tools_value, template_tools) : ResponsesJson::array();
  if (!echo["tools"].empty() && served->second.output_format.tool_calls == ToolCallFormat::kNone) {
    throw unsupported_parameter("tools", "no parser reads the tool calls of model '" + model + "'");
  }
  std::set<std::string> tool_names;
  for (const ResponsesJson& tool : echo["tools"]) tool_names.insert(tool["name"].get<std::string>());
  const ResponsesJson* tool_choice = optional_field(body, "tool_choice");
  read_tool_choice(tool_choice, tool_names);  // checked here, kept in the echo
  echo["tool_choice"] = tool_choice ? *tool_choice : ResponsesJson("auto");
  const ResponsesJson* parallel = optional_field(body, "parallel_tool_calls");
  echo["parallel_tool_calls"] = !parallel || as_bool(*parallel, "parallel_tool_calls");

  const ServedModel& served_model = served->second;
  std::int64_t max_tokens = kDefaultMaxOutputTokens;
  if (served_model.max_model_len > 0) max_tokens = std::min(max_tokens, std::max<std::int64_t>(1, served_model.max_model_len / 2));
  if (const ResponsesJson* value = optional_field(body, "max_output_tokens")) {
    max_tokens = as_integer(*value, "max_output_tokens");
    if (max_tokens < 1) throw invalid_request("'max_output_tokens' must be at least 1", "max_output_tokens");
    if (served_model.max_model_len > 0 && max_tokens >= served_model.max_model_len) {
      throw invalid_request("'max_output_tokens' (" + std::to_string(max_tokens) + ") leaves no room for the input in model '" +
                                model + "''s context of " + std::to_string(served_model.max_model_len) + " tokens",
                            "max_output_tokens");
    }
    echo["max_output_tokens"] = max_tokens;
  } else {
    echo["max_output_tokens"] = nullptr;
  }
  const double temperature = read_range(optional_field(body, "temperature"), "temperature", 0, 2, 1);
  const double top_p = read_range(optional_field(body, "top_p"), "top_p", 0, 1, 1);
  if (top_p == 0) throw invalid_request("'top_p' must be greater than 0", "top_p");
  echo["temperature"] = temperature;
  echo["top_p"] = top_p;
  const ResponsesJson* metadata = optional_field(body, "metadata");
  echo["metadata"] = metadata ? read_metadata(*metadata) : ResponsesJson::object();
  const ResponsesJson* reasoning = optional_field(body, "reasoning");
  echo["reasoning"] = reasoning ? read_reasoning(*reasoning, template_kwargs)
                                : ResponsesJson{{"effort", nullptr}, {"summary", nullptr}};
  const ResponsesJson* text = optional_field(body, "text");
  echo["text"] = text ? read_text_config(*text) : ResponsesJson{{"format", {{"type", "text"}}}, {"verbosity", "medium"}};
  echo["truncation"] = "disabled";
  echo["store"] = request.store;
  echo["background"] = request.background;
  if (const ResponsesJson* user = optional_field(body, "user")) echo["user"] = as_string(*user, "user");
  if (const ResponsesJson* id = optional_field(body, "safety_identifier")) {
    echo["safety_identifier"] = as_string(*id, "safety_identifier");
  }

  const ResponsesJson* enable_thinking = template_kwargs.contains("enable_thinking") ? &template_kwargs["enable_thinking"] : nullptr;
  const bool thinking_off = enable_thinking && enable_thinking->is_boolean() && !enable_thinking->get<bool>();
  request.settings = settings_from(model, echo, served_model.output_format,
                                   served_model.reasoning_opens_in_prompt && !thinking_off);

  protocol::Job& job = request.job;
  job.prompt = read_responses_input(*input, instructions);
  job.model = model;
  job.stream = true;
  job.max_tokens = max_tokens;
  job.temperature = temperature;
  job.top_p = top_p;
  job.priority = options.priority;
  job.deadline_ms = options.deadline_ms;
  const ResponsesJson* user = optional_field(body, "user");
  job.session = read_session(options.session, user ? std::optional<std::string>(as_string(*user, "user")) : std::nullopt);
  if (!template_tools.empty()) job.tools = dump(template_tools);
  if (!template_kwargs.empty()) job.chat_template_kwargs = dump(template_kwargs);
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
