#include "gateway/openai/structured_output_request.h"

#include "gateway/openai/api_error.h"
#include "shared/error.h"
#include "worker/grammar/gbnf_parser.h"
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

// The grammar engine's verdict on the output (parsed and checked, short of binding it to a
// tokenizer), as a 400 naming what it cannot take.
std::string checked(std::string output, const std::string& param) {
  try {
    (void)grammar::parse_gbnf(grammar::request_gbnf(grammar::read_structured_output(output)));
  } catch (const Error& e) {
    throw invalid_request(std::string("'") + param + "': " + e.what(), param);
  }
  return output;
}

std::string string_field(const nlohmann::ordered_json& value, const std::string& param) {
  if (!value.is_string()) throw invalid_request("'" + param + "' must be a string", param, "invalid_type");
  return value.get<std::string>();
}

// A schema given as an object or as its JSON text.
std::string schema_field(const nlohmann::ordered_json& value, const std::string& param) {
  nlohmann::ordered_json schema = value;
  if (value.is_string()) {
    schema = nlohmann::ordered_json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) throw invalid_request("'" + param + "' is not JSON text of a schema", param);
  }
  if (!schema.is_object() && !schema.is_boolean()) throw invalid_request("'" + param + "' must be a JSON Schema", param);
  return grammar::json_schema_output(schema.dump());
}

std::string choice_field(const nlohmann::ordered_json& value, const std::string& param) {
  if (!value.is_array() || value.empty()) throw invalid_request("'" + param + "' must be a non-empty array of strings", param);
  for (const nlohmann::ordered_json& choice : value) {
    if (!choice.is_string()) throw invalid_request("'" + param + "' must hold strings", param, "invalid_type");
  }
  return nlohmann::ordered_json{{"type", "choice"}, {"choices", value}}.dump();
}

std::string regex_field(const nlohmann::ordered_json& value, const std::string& param) {
  return nlohmann::ordered_json{{"type", "regex"}, {"pattern", string_field(value, param)}}.dump();
}

std::string grammar_field(const nlohmann::ordered_json& value, const std::string& param) {
  return nlohmann::ordered_json{{"type", "grammar"}, {"grammar", string_field(value, param)}}.dump();
}

// vLLM's `structured_outputs`: exactly one of its kinds.
std::string structured_outputs_field(const nlohmann::ordered_json& value) {
  const std::string param = "structured_outputs";
  if (!value.is_object()) throw invalid_request("'structured_outputs' must be an object", param, "invalid_type");
  std::optional<std::string> output;
  for (const auto& [key, given] : value.items()) {
    if (given.is_null()) continue;
    if (output) throw invalid_request("'structured_outputs' takes one kind of output", param, "conflicting_values");
    const std::string at = param + "." + key;
    if (key == "json") {
      output = schema_field(given, at);
    } else if (key == "regex") {
      output = regex_field(given, at);
    } else if (key == "choice") {
      output = choice_field(given, at);
    } else if (key == "grammar") {
      output = grammar_field(given, at);
    } else if (key == "json_object") {
      if (given != true) throw invalid_request("'" + at + "' must be true", param);
      output = grammar::json_object_output();
    } else {
      throw invalid_request("'" + at + "' is not supported (json, regex, choice, grammar or json_object)", param,
                            "unsupported_parameter");
    }
  }
  if (!output) throw invalid_request("'structured_outputs' asks for nothing", param);
  return *output;
}

}  // namespace

std::optional<std::string> read_guided_fields(RequestBody& body) {
  std::optional<std::pair<std::string, std::string>> given;  // the field, and what it asks for
  auto take = [&](const char* field, auto read) {
    const nlohmann::ordered_json* value = body.find(field);
    if (value == nullptr) return;
    if (given) {
      throw invalid_request("'" + given->first + "' and '" + field + "' both ask for a structured output", field,
                            "conflicting_values");
    }
    given.emplace(field, read(*value, std::string(field)));
  };
  take("guided_json", schema_field);
  take("guided_regex", regex_field);
  take("guided_choice", choice_field);
  take("guided_grammar", grammar_field);
  take("structured_outputs", [](const nlohmann::ordered_json& value, const std::string&) {
    return structured_outputs_field(value);
  });
  if (!given) return std::nullopt;
  return checked(std::move(given->second), given->first);
}

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
