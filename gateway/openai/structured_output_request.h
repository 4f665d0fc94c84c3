// OpenAI's structured-output fields read into a job's `structured_output` (docs/gateway.md,
// "Structured outputs"): chat completions' `response_format` and the Responses API's
// `text.format` ({"type": "text"}: none; "json_object"; "json_schema" with the schema). Each is
// checked here by the grammar engine, so that an unsupported keyword or a malformed schema is a
// 400 naming it rather than a job that fails on the worker.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "gateway/openai/request_body.h"

namespace flashq::gateway {

// `response_format`: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}.
std::optional<std::string> read_response_format(const nlohmann::ordered_json& response_format);
// `text.format`: {"type": "json_schema", "name", "schema", "strict"}; `param` names it in errors.
std::optional<std::string> read_text_format(const nlohmann::ordered_json& format, const std::string& param);
// vLLM's extension fields, on chat completions and completions alike: `guided_json` (a schema,
// or its JSON text), `guided_regex`, `guided_choice`, `guided_grammar` (GBNF), or
// `structured_outputs` {json | regex | choice | grammar | json_object: true}; at most one.
std::optional<std::string> read_guided_fields(RequestBody& body);

}  // namespace flashq::gateway
