#include "worker/grammar/structured_output.h"

#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace flashq::grammar {
namespace {

Error invalid(const std::string& what) { return Error(ErrorCode::kInvalidArgument, "structured output: " + what); }

const nlohmann::json& field(const nlohmann::json& spec, const char* key, nlohmann::json::value_t type,
                            const char* type_name) {
  const auto it = spec.find(key);
  if (it == spec.end()) throw invalid(std::string("'") + key + "' is missing");
  if (it->type() != type) throw invalid(std::string("'") + key + "' must be " + type_name);
  return *it;
}

}  // namespace

GrammarRequest read_structured_output(std::string_view json) {
  const nlohmann::json spec = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) throw invalid("must be a JSON object");
  const std::string type = field(spec, "type", nlohmann::json::value_t::string, "a string").get<std::string>();
  if (type == "json_schema") {
    const auto it = spec.find("schema");
    if (it == spec.end()) throw invalid("'schema' is missing");
    if (!it->is_object() && !it->is_boolean()) throw invalid("'schema' must be an object");
    return {.format = GrammarFormat::kJsonSchema, .text = it->dump()};
  }
  if (type == "json_object") return {.format = GrammarFormat::kJsonObject};
  if (type == "regex") {
    return {.format = GrammarFormat::kRegex,
            .text = field(spec, "pattern", nlohmann::json::value_t::string, "a string").get<std::string>()};
  }
  if (type == "grammar") {
    return {.format = GrammarFormat::kGbnf,
            .text = field(spec, "grammar", nlohmann::json::value_t::string, "a string").get<std::string>()};
  }
  if (type == "choice") {
    GrammarRequest request{.format = GrammarFormat::kChoice};
    for (const nlohmann::json& choice : field(spec, "choices", nlohmann::json::value_t::array, "an array")) {
      if (!choice.is_string()) throw invalid("'choices' must hold strings");
      request.choices.push_back(choice.get<std::string>());
    }
    if (request.choices.empty()) throw invalid("'choices' is empty");
    return request;
  }
  throw invalid("unknown type '" + type + "' (json_schema, json_object, regex, choice or grammar)");
}

std::string json_schema_output(std::string_view schema_json) {
  return R"({"type":"json_schema","schema":)" + std::string(schema_json) + "}";
}

std::string json_object_output() { return R"({"type":"json_object"})"; }

}  // namespace flashq::grammar
