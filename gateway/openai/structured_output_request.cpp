#include "gateway/openai/structured_output_request.h"

#include "gateway/openai/api_error.h"
#include "shared/error.h"
#include "worker/grammar/grammar_compiler.h"
#include "worker/grammar/structured_output.h"

namespace flashq::gateway {
namespace {

// The format's type; nullopt for "text".
std::optional<std::string> format_type(const nlohmann::ordered_json& format, const std::string& param) {
  if (!format.is_object()) throw invalid_request("'" + param + "' must be an object", param);
  const auto type = format.find("type");
  if (type == format.end() || !type->is_string()) throw invalid_request("'" + param + ".type' must be a string", param);
  const std::string name = type->get<std::string>();
  if (name == "text") return std::nullopt;
  if (name != "json_object" && name != "json_schema") {
    throw invalid_request("'" + param + ".type' must be text, json_object or json_schema, not '" + name + "'", param);
  }
  return name;
}

// The structured output for a json_schema format whose schema is `holder["schema"]` (at `where`
// in the request).
std::string schema_output(const nlohmann::ordered_json& holder, const std::string& where, const std::string& param) {
  const auto schema = holder.find("schema");
  if (schema == holder.end() || !(schema->is_object() || schema->is_boolean())) {
    throw invalid_request("'" + where + ".schema' must be a JSON Schema object", param);
  }
  return grammar::json_schema_output(schema->dump());
}

// The grammar engine's verdict on the output, as a 400 naming what it cannot take.
std::string checked(std::string output, const std::string& param) {
  try {
    (void)grammar::request_gbnf(grammar::read_structured_output(output));
  } catch (const Error& e) {
    throw invalid_request(std::string("'") + param + "': " + e.what(), param);
  }
  return output;
}

}  // namespace

std::optional<std::string> read_response_format(const nlohmann::ordered_json& response_format) {
  const std::string param = "response_format";
  const std::optional<std::string> type = format_type(response_format, param);
  if (!type) return std::nullopt;
  if (*type == "json_object") return grammar::json_object_output();
  const auto json_schema = response_format.find("json_schema");
  if (json_schema == response_format.end() || !json_schema->is_object()) {
    throw invalid_request("'response_format.json_schema' must be an object with the schema", param);
  }
  return checked(schema_output(*json_schema, param + ".json_schema", param), param);
}

std::optional<std::string> read_text_format(const nlohmann::ordered_json& format, const std::string& param) {
  const std::optional<std::string> type = format_type(format, param);
  if (!type) return std::nullopt;
  if (*type == "json_object") return grammar::json_object_output();
  return checked(schema_output(format, param, param), param);
}

}  // namespace flashq::gateway
