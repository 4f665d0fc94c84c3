#include "worker/grammar/json_schema_merge.h"

#include <algorithm>
#include <set>
#include <vector>

#include "shared/error.h"

namespace flashq::grammar {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "JSON schema at " + path + ": " + what);
}

// Thrown inside the merge when no value can satisfy both schemas; merge_schemas answers nothing.
struct NoCommonValue {};

// A property's or item's schemas merged: there an empty intersection is not the whole schema's.
Json merge_nested(const Json& a, const Json& b, const std::string& path) {
  std::optional<Json> merged = merge_schemas(a, b, path);
  if (!merged) refuse(path, "no value satisfies both schemas of the intersection here");
  return *merged;
}

const std::set<std::string> kLowerBounds{"minimum", "exclusiveMinimum", "minLength", "minItems"};
const std::set<std::string> kUpperBounds{"maximum", "exclusiveMaximum", "maxLength", "maxItems"};
const std::set<std::string> kAnnotations{"$schema", "$id", "id", "title", "description", "default",
                                         "examples", "$comment", "deprecated", "readOnly", "writeOnly",
                                         "$defs", "definitions"};

std::vector<std::string> types_of(const Json& type) {
  if (type.is_string()) return {type.get<std::string>()};
  std::vector<std::string> out;
  for (const Json& t : type) {
    if (t.is_string()) out.push_back(t.get<std::string>());
  }
  return out;
}

// The types both allow; an integer is a number.
Json common_types(const Json& a, const Json& b) {
  std::vector<std::string> ta = types_of(a), tb = types_of(b), both;
  auto has = [](const std::vector<std::string>& ts, const std::string& t) {
    return std::find(ts.begin(), ts.end(), t) != ts.end();
  };
  for (const std::string& t : ta) {
    if (has(tb, t) || (t == "integer" && has(tb, "number"))) both.push_back(t);
  }
  for (const std::string& t : tb) {
    if (t == "integer" && has(ta, "number") && !has(both, t)) both.push_back(t);
  }
  if (both.empty()) throw NoCommonValue{};
  return both.size() == 1 ? Json(both[0]) : Json(both);
}

Json common_enum(const Json& a, const Json& b) {
  Json both = Json::array();
  for (const Json& v : a) {
    if (std::find(b.begin(), b.end(), v) != b.end()) both.push_back(v);
  }
  if (both.empty()) throw NoCommonValue{};
  return both;
}

Json merged_keyword(const std::string& key, const Json& a, const Json& b, const std::string& path) {
  if (a == b || kAnnotations.count(key) > 0) return a;
  if (key == "required") {
    Json all = a;
    for (const Json& name : b) {
      if (std::find(all.begin(), all.end(), name) == all.end()) all.push_back(name);
    }
    return all;
  }
  if (key == "properties" && a.is_object() && b.is_object()) {
    Json all = a;
    for (const auto& [name, schema] : b.items()) {
      all[name] = all.contains(name) ? merge_nested(all[name], schema, path + "/properties/" + name) : schema;
    }
    return all;
  }
  if (key == "items") return merge_nested(a, b, path + "/items");
  if (key == "type") return common_types(a, b);
  if (key == "enum" && a.is_array() && b.is_array()) return common_enum(a, b);
  bool numbers = a.is_number() && b.is_number();
  if (numbers && kLowerBounds.count(key) > 0) return a.get<double>() >= b.get<double>() ? a : b;
  if (numbers && kUpperBounds.count(key) > 0) return a.get<double>() <= b.get<double>() ? a : b;
  refuse(path, "unsupported keyword '" + key + "' in both schemas of an intersection, differently");
}

// Keywords whose meaning depends on their siblings in one schema, so a merge would change it:
// additionalProperties judges only the properties beside it, and draft 4's boolean
// exclusiveMinimum qualifies only the minimum beside it.
void check_sibling_dependent(const Json& a, const Json& b, const std::string& path) {
  for (const auto& [one, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    if (one->contains("additionalProperties") && other->contains("properties")) {
      for (const auto& [name, schema] : other->at("properties").items()) {
        bool declared = one->contains("properties") && one->at("properties").contains(name);
        if (!declared) {
          refuse(path, "unsupported keyword 'additionalProperties' in an intersection whose other schema declares '" +
                           name + "'");
        }
      }
    }
    for (const auto& [exclusive, bound] : {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
      if (one->contains(exclusive) && one->at(exclusive).is_boolean() && other->contains(bound)) {
        refuse(path, std::string("unsupported keyword '") + exclusive + "' (draft 4, boolean) in an intersection");
      }
    }
  }
}

}  // namespace

std::optional<Json> merge_schemas(const Json& a, const Json& b, const std::string& path) {
  for (const Json* side : {&a, &b}) {
    if (side->is_boolean() && !side->get<bool>()) refuse(path, "the schema false allows no value");
    if (!side->is_boolean() && !side->is_object()) refuse(path, "a schema must be an object or a boolean");
  }
  if (a.is_boolean()) return b;
  if (b.is_boolean()) return a;
  check_sibling_dependent(a, b, path);
  Json merged = a;
  try {
    for (const auto& [key, value] : b.items()) {
      merged[key] = merged.contains(key) ? merged_keyword(key, merged[key], value, path) : value;
    }
  } catch (const NoCommonValue&) {
    return std::nullopt;
  }
  bool has_ref = merged.contains("$ref");
  for (const auto& [key, value] : merged.items()) {
    if (has_ref && key != "$ref" && kAnnotations.count(key) == 0) {
      refuse(path, "unsupported keyword '$ref' beside '" + key + "' in an intersection");
    }
  }
  return merged;
}

}  // namespace flashq::grammar
