#include "worker/grammar/json_schema_disjoint.h"

#include <set>
#include <string>
#include <vector>

namespace flashq::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::string type_of(const Json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "boolean";
  if (value.is_number_integer() || value.is_number_unsigned()) return "integer";
  if (value.is_number()) return "number";
  if (value.is_string()) return "string";
  return value.is_array() ? "array" : "object";
}

// The constant values a schema allows, when it lists them (const or enum).
const Json* literals(const Json& schema) {
  if (!schema.is_object()) return nullptr;
  if (schema.contains("enum") && schema.at("enum").is_array()) return &schema.at("enum");
  return nullptr;
}

std::vector<Json> literal_values(const Json& schema) {
  if (schema.is_object() && schema.contains("const")) return {schema.at("const")};
  std::vector<Json> values;
  if (const Json* list = literals(schema)) values.assign(list->begin(), list->end());
  return values;
}

// The types a schema may accept; empty means any.
std::set<std::string> types_of(const Json& schema) {
  std::set<std::string> types;
  if (!schema.is_object()) return types;
  for (const Json& value : literal_values(schema)) types.insert(type_of(value));
  if (!types.empty() || !schema.contains("type")) return types;
  const Json& type = schema.at("type");
  if (type.is_string()) types.insert(type.get<std::string>());
  for (const Json& t : type.is_array() ? type : Json::array()) {
    if (t.is_string()) types.insert(t.get<std::string>());
  }
  return types;
}

bool types_disjoint(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (a.empty() || b.empty()) return false;
  for (const std::string& x : a) {
    for (const std::string& y : b) {
      bool numeric = (x == "integer" || x == "number") && (y == "integer" || y == "number");
      if (x == y || numeric) return false;
    }
  }
  return true;
}

bool literals_disjoint(const Json& a, const Json& b) {
  std::vector<Json> va = literal_values(a), vb = literal_values(b);
  if (va.empty() || vb.empty()) return false;
  for (const Json& x : va) {
    for (const Json& y : vb) {
      if (x == y) return false;
    }
  }
  return true;
}

bool requires_property(const Json& schema, const std::string& name) {
  if (!schema.contains("required") || !schema.at("required").is_array()) return false;
  for (const Json& r : schema.at("required")) {
    if (r == name) return true;
  }
  return false;
}

// Objects told apart by a property both require, with different constants in each.
bool discriminated(const Json& a, const Json& b) {
  if (!a.is_object() || !b.is_object() || !a.contains("properties") || !b.contains("properties")) return false;
  for (const auto& [name, schema] : a.at("properties").items()) {
    if (!b.at("properties").contains(name) || !requires_property(a, name) || !requires_property(b, name)) continue;
    if (literals_disjoint(schema, b.at("properties").at(name))) return true;
  }
  return false;
}

}  // namespace

bool provably_disjoint(const Json& a, const Json& b) {
  return types_disjoint(types_of(a), types_of(b)) || literals_disjoint(a, b) || discriminated(a, b);
}

}  // namespace flashq::grammar
