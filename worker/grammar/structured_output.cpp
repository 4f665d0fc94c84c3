#include "worker/grammar/structured_output.h"

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "worker/grammar/tool_call_grammar.h"

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

// The value the string field `key` names; kInvalidArgument listing the names known for another.
template <typename T>
T named_value(const nlohmann::json& spec, const char* key, std::initializer_list<std::pair<const char*, T>> names) {
  const std::string given = field(spec, key, nlohmann::json::value_t::string, "a string").get<std::string>();
  std::string known;
  for (const auto& [name, value] : names) {
    if (given == name) return value;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  throw invalid("'" + std::string(key) + "' is '" + given + "', not one of " + known);
}

ToolSchema read_tool_schema(const nlohmann::json& tool) {
  if (!tool.is_object()) throw invalid("'tools' must hold objects");
  ToolSchema schema{.name = field(tool, "name", nlohmann::json::value_t::string, "a string").get<std::string>()};
  if (const auto parameters = tool.find("parameters"); parameters != tool.end() && !parameters->is_null()) {
    if (!parameters->is_object()) throw invalid("a tool's 'parameters' must be a JSON Schema object");
    schema.parameters_json = parameters->dump();
  }
  if (const auto strict = tool.find("strict"); strict != tool.end()) {
    if (!strict->is_boolean()) throw invalid("a tool's 'strict' must be a boolean");
    schema.strict = strict->get<bool>();
  }
  return schema;
}

// {"type": "tool_calls", "format", "choice", "tools", "parallel", "reasoning", "answer"}: the
// grammar of tool_call_grammar.h.
GrammarRequest read_tool_calls(const nlohmann::json& spec) {
  ToolCallRequest request;
  request.syntax = named_value<ToolCallSyntax>(spec, "format", {{"hermes", ToolCallSyntax::kHermes},
                                                               {"llama3_json", ToolCallSyntax::kLlama3Json},
                                                               {"harmony", ToolCallSyntax::kHarmony}});
  request.choice = named_value<ToolCallChoice>(
      spec, "choice",
      {{"required", ToolCallChoice::kRequired}, {"named", ToolCallChoice::kNamed}, {"auto", ToolCallChoice::kAuto}});
  for (const nlohmann::json& tool : field(spec, "tools", nlohmann::json::value_t::array, "an array")) {
    request.tools.push_back(read_tool_schema(tool));
  }
  if (spec.contains("parallel")) {
    request.parallel = field(spec, "parallel", nlohmann::json::value_t::boolean, "a boolean").get<bool>();
  }
  if (spec.contains("reasoning")) {
    request.reasoning = named_value<ReasoningStart>(
        spec, "reasoning",
        {{"none", ReasoningStart::kNone}, {"optional", ReasoningStart::kOptional}, {"inside", ReasoningStart::kInside}});
  }
  if (const auto answer = spec.find("answer"); answer != spec.end()) {
    if (!answer->is_object() || answer->value("type", "") == "tool_calls") {
      throw invalid("'answer' must be a structured output other than tool_calls");
    }
    request.answer = read_structured_output(answer->dump());
  }
  return {.format = GrammarFormat::kGbnf,
          .text = tool_call_grammar(request),
          .spells_special_tokens = spells_special_tokens(request.syntax)};
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
  if (type == "tool_calls") return read_tool_calls(spec);
  throw invalid("unknown type '" + type + "' (json_schema, json_object, regex, choice, grammar or tool_calls)");
}

std::string json_schema_output(std::string_view schema_json) {
  return R"({"type":"json_schema","schema":)" + std::string(schema_json) + "}";
}

std::string json_object_output() { return R"({"type":"json_object"})"; }

}  // namespace flashq::grammar
