#include "worker/grammar/json_schema_grammar.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "worker/grammar/gbnf_text.h"
#include "worker/grammar/integer_range.h"
#include "worker/grammar/json_schema_disjoint.h"
#include "worker/grammar/json_schema_merge.h"
#include "worker/grammar/json_text.h"
#include "worker/grammar/regex_grammar.h"
#include "worker/text/utf8.h"

namespace flashq::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate: they never change which instances are valid.
const std::set<std::string, std::less<>> kAnnotations{
    "$schema", "$id", "id", "title", "description", "default", "examples", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "format",
    "contentEncoding", "contentMediaType"};
const std::set<std::string, std::less<>> kSupported{
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
    "additionalProperties", "items", "minItems", "maxItems", "pattern", "minLength",
    "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const char* const kTypes[] = {"object", "array", "string", "number", "boolean", "null"};

// The string formats enforced, as anchored patterns (RFC 3339 for dates and times, RFC 4122's
// text form for UUIDs, dotted decimal for IPv4). Other formats are annotations only.
const std::map<std::string, std::string, std::less<>> kFormats{
    {"date", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)"},
    {"time", R"(^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
    {"date-time", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
    {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
    {"ipv4", R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
};

// The enforced format of a string schema, as a pattern, or nothing.
std::optional<std::string> format_pattern(const Json& schema) {
  if (!schema.contains("format") || !schema.at("format").is_string()) return std::nullopt;
  auto it = kFormats.find(schema.at("format").get<std::string>());
  if (it == kFormats.end()) return std::nullopt;
  return it->second;
}

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "JSON schema at " + path + ": " + what);
}

// The compact JSON text of a value, as a GBNF literal (enum and const).
std::string json_literal(const Json& value) {
  return gbnf_literal(value.dump(-1, ' ', false, Json::error_handler_t::replace));
}

std::string key_literal(const std::string& key) {
  std::string text = "\"";
  for (size_t pos = 0; pos < key.size();) text += json_escaped(next_code_point(key, pos));
  return gbnf_literal(text + "\"");
}

std::string alternatives(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

std::vector<std::string> type_names(const Json& schema, const std::string& path);

class SchemaConverter {
 public:
  explicit SchemaConverter(const Json& root) : root_(root) {}

  std::string convert() {
    std::string body = schema_body(root_, "#", "root", 0);
    std::string out = "root ::= " + body + "\n";
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    return out + json_value_rules();
  }

 private:
  std::string define(const std::string& hint, const std::string& body);
  void add_rule(const std::string& name, const std::string& body);
  std::string reserve_name(const std::string& hint);
  std::string schema_rule(const Json& schema, const std::string& path, const std::string& hint, int depth);
  std::string schema_body(const Json& schema, const std::string& path, const std::string& hint, int depth);
  std::string combinator_body(const Json& schema, const std::string& combinator, const std::string& path,
                              const std::string& hint, int depth);
  std::string ref_rule(const std::string& ref, const std::string& path, int depth);
  const Json& resolve_ref(const Json& schema) const;
  void check_disjoint(const std::vector<Json>& branches, const std::string& at) const;
  Json flatten(const Json& schema, const std::string& at) const;
  std::string typed_body(const std::string& type, const Json& schema, const std::string& path,
                         const std::string& hint, int depth);
  std::string object_body(const Json& schema, const std::string& path, const std::string& hint, int depth);
  std::string array_body(const Json& schema, const std::string& path, const std::string& hint, int depth);
  std::string string_body(const Json& schema, const std::string& path);
  std::string integer_body(const Json& schema, const std::string& path);
  std::string number_body(const Json& schema, const std::string& path);
  void check_keywords(const Json& schema, const std::string& path);

  const Json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_{"root"};
  std::map<std::string, std::string> ref_names_;
  std::map<std::string, int> next_suffix_;
  size_t gbnf_bytes_ = 0;
};

std::string SchemaConverter::reserve_name(const std::string& hint) {
  std::string base;
  for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  if (base.size() > 48) base.resize(48);
  std::string name = base;
  // Numbered from where this base left off: a schema with thousands of properties would
  // otherwise try every number again for each.
  int& n = next_suffix_[base];
  while (names_.count(name) > 0 || name.rfind("json-", 0) == 0) name = base + "-" + std::to_string(++n + 1);
  names_.insert(name);
  return name;
}

std::string SchemaConverter::define(const std::string& hint, const std::string& body) {
  std::string name = reserve_name(hint);
  add_rule(name, body);
  return name;
}

void SchemaConverter::add_rule(const std::string& name, const std::string& body) {
  rules_.emplace_back(name, body);
  gbnf_bytes_ += name.size() + body.size();
  if (rules_.size() > kMaxSchemaRules || gbnf_bytes_ > kMaxSchemaGbnfBytes) {
    refuse("#", "the schema is too large (more than " + std::to_string(kMaxSchemaRules) +
                    " rules or " + std::to_string(kMaxSchemaGbnfBytes) + " bytes of grammar)");
  }
}

std::string SchemaConverter::schema_rule(const Json& schema, const std::string& path,
                                         const std::string& hint, int depth) {
  return define(hint, schema_body(schema, path, hint, depth));
}

void SchemaConverter::check_keywords(const Json& schema, const std::string& path) {
  for (const auto& [key, value] : schema.items()) {
    if (kAnnotations.count(key) == 0 && kSupported.count(key) == 0) {
      refuse(path, "unsupported keyword '" + key + "'");
    }
  }
}


std::string SchemaConverter::schema_body(const Json& schema, const std::string& path,
                                         const std::string& hint, int depth) {
  if (depth > kMaxSchemaDepth) refuse(path, "nested deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) refuse(path, "the schema false allows no value");
    return "json-value";
  }
  if (!schema.is_object()) refuse(path, "a schema must be an object or a boolean");
  check_keywords(schema, path);
  if (schema.contains("$ref")) {
    const Json& ref = schema.at("$ref");
    return ref_rule(ref.is_string() ? ref.get<std::string>() : "", path + "/$ref", depth);
  }
  for (const char* combinator : {"allOf", "anyOf", "oneOf"}) {
    if (schema.contains(combinator)) return combinator_body(schema, combinator, path, hint, depth);
  }
  if (schema.contains("const")) return json_literal(schema.at("const"));
  if (schema.contains("enum")) {
    const Json& values = schema.at("enum");
    if (!values.is_array() || values.empty()) refuse(path + "/enum", "'enum' must be a non-empty array");
    std::vector<std::string> parts;
    for (const Json& value : values) parts.push_back(json_literal(value));
    return alternatives(parts);
  }
  bool only_annotations = !format_pattern(schema).has_value();
  for (const auto& [key, value] : schema.items()) only_annotations = only_annotations && kAnnotations.count(key) > 0;
  if (only_annotations) return "json-value";
  std::vector<std::string> parts;
  for (const std::string& type : type_names(schema, path)) {
    parts.push_back(typed_body(type, schema, path, hint, depth));
  }
  return alternatives(parts);
}

// anyOf is a union of its branches, and so is oneOf when its branches provably cannot overlap
// (json_schema_disjoint.h); allOf, and keywords beside anyOf or oneOf, are intersections, which
// are merged into one schema (json_schema_merge.h) where each keyword's meaning allows it.
std::string SchemaConverter::combinator_body(const Json& schema, const std::string& combinator,
                                             const std::string& path, const std::string& hint, int depth) {
  const Json& list = schema.at(combinator);
  std::string at = path + "/" + combinator;
  if (!list.is_array() || list.empty()) refuse(at, "'" + combinator + "' must be a non-empty array");
  Json base = schema;
  base.erase(combinator);
  bool constrained = false;
  for (const auto& [key, value] : base.items()) constrained = constrained || kSupported.count(key) > 0;
  if (combinator == "allOf") {
    std::optional<Json> merged = base;
    for (size_t i = 0; i < list.size() && merged; ++i) {
      merged = merge_schemas(*merged, resolve_ref(list[i]), at + "/" + std::to_string(i));
    }
    if (!merged) refuse(at, "no value satisfies every schema of 'allOf'");
    return schema_body(*merged, at, hint, depth + 1);
  }
  std::vector<Json> branches;  // branches no value can satisfy beside the base are left out
  for (size_t i = 0; i < list.size(); ++i) {
    std::string branch_path = at + "/" + std::to_string(i);
    std::optional<Json> branch = constrained ? merge_schemas(base, resolve_ref(list[i]), branch_path) : list[i];
    if (branch) branches.push_back(std::move(*branch));
  }
  if (branches.empty()) refuse(at, "no branch of '" + combinator + "' can be satisfied beside the other keywords");
  if (combinator == "oneOf") check_disjoint(branches, at);
  std::vector<std::string> parts;
  for (size_t i = 0; i < branches.size(); ++i) {
    parts.push_back(schema_rule(branches[i], at + "/" + std::to_string(i), hint + "-" + std::to_string(i), depth + 1));
  }
  return alternatives(parts);
}

void SchemaConverter::check_disjoint(const std::vector<Json>& branches, const std::string& at) const {
  for (size_t i = 0; i < branches.size(); ++i) {
    for (size_t j = i + 1; j < branches.size(); ++j) {
      if (!provably_disjoint(flatten(branches[i], at), flatten(branches[j], at))) {
        refuse(at, "unsupported keyword 'oneOf' whose branches " + std::to_string(i) + " and " + std::to_string(j) +
                       " may both match (only branches of different types or constants are supported)");
      }
    }
  }
}

// A schema with its top-level $ref resolved and its allOf merged: what it allows, for comparing.
Json SchemaConverter::flatten(const Json& schema, const std::string& at) const {
  const Json& s = resolve_ref(schema);
  if (!s.is_object() || !s.contains("allOf") || !s.at("allOf").is_array()) return s;
  std::optional<Json> merged = s;
  merged->erase("allOf");
  for (const Json& part : s.at("allOf")) {
    if (merged) merged = merge_schemas(*merged, resolve_ref(part), at);
  }
  return merged ? *merged : s;
}

// A schema that is only a local $ref (and annotations), replaced by what it points at, so that
// it can be merged with other keywords; anything else as it is.
const Json& SchemaConverter::resolve_ref(const Json& schema) const {
  const Json* at = &schema;
  for (int hops = 0; hops < 8 && at->is_object() && at->contains("$ref") && at->at("$ref").is_string(); ++hops) {
    for (const auto& [key, value] : at->items()) {
      if (key != "$ref" && kAnnotations.count(key) == 0) return *at;
    }
    std::string ref = at->at("$ref").get<std::string>();
    if (ref.empty() || ref[0] != '#') return *at;
    try {
      at = &root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const nlohmann::json::exception&) {
      return *at;  // refused, naming the $ref, when the schema is built
    }
  }
  return *at;
}

// The types a schema allows: its `type`, or every type when it has none.
std::vector<std::string> type_names(const Json& schema, const std::string& path) {
  std::vector<std::string> types;
  if (!schema.contains("type")) {
    types.assign(std::begin(kTypes), std::end(kTypes));
  } else if (schema.at("type").is_string()) {
    types.push_back(schema.at("type").get<std::string>());
  } else if (schema.at("type").is_array() && !schema.at("type").empty()) {
    for (const Json& t : schema.at("type")) {
      if (!t.is_string()) refuse(path + "/type", "'type' must name types");
      types.push_back(t.get<std::string>());
    }
  } else {
    refuse(path + "/type", "'type' must be a type name or a non-empty array of them");
  }
  return types;
}

// A local reference (#, #/$defs/x, #/definitions/x or any JSON pointer into the document)
// becomes one rule, named before its body is built so that recursion refers back to it.
std::string SchemaConverter::ref_rule(const std::string& ref, const std::string& path, int depth) {
  if (auto it = ref_names_.find(ref); it != ref_names_.end()) return it->second;
  if (ref.empty() || ref[0] != '#') refuse(path, "only local '$ref' (starting with #) is supported, not '" + ref + "'");
  const Json* target = &root_;
  try {
    std::string pointer = ref.substr(1);
    target = &root_.at(Json::json_pointer(pointer));
  } catch (const nlohmann::json::exception&) {
    refuse(path, "'$ref' " + ref + " points at nothing in the schema");
  }
  std::string name = reserve_name("ref" + ref.substr(1));
  ref_names_[ref] = name;
  std::string body = schema_body(*target, ref, name, depth + 1);
  add_rule(name, body);
  return name;
}

std::string SchemaConverter::typed_body(const std::string& type, const Json& schema,
                                        const std::string& path, const std::string& hint, int depth) {
  if (type == "object") return object_body(schema, path, hint, depth);
  if (type == "array") return array_body(schema, path, hint, depth);
  if (type == "string") return string_body(schema, path);
  if (type == "integer") return integer_body(schema, path);
  if (type == "boolean") return "json-boolean";
  if (type == "null") return "json-null";
  if (type != "number") refuse(path + "/type", "unknown type '" + type + "'");
  return number_body(schema, path);
}

// Properties in declared order, optional ones skippable, commas right whichever are present:
// first_i matches properties i.. when none was written yet, rest_i when one was (so a comma
// comes first). Extra properties (additionalProperties true or a schema) may follow them.
std::string SchemaConverter::object_body(const Json& schema, const std::string& path,
                                         const std::string& hint, int depth) {
  std::vector<std::pair<std::string, const Json*>> properties;
  if (schema.contains("properties")) {
    if (!schema.at("properties").is_object()) refuse(path + "/properties", "'properties' must be an object");
    for (const auto& [key, value] : schema.at("properties").items()) {
      if (!(value.is_boolean() && !value.get<bool>())) properties.emplace_back(key, &value);
    }
  }
  std::set<std::string> required;
  if (schema.contains("required")) {
    if (!schema.at("required").is_array()) refuse(path + "/required", "'required' must be an array");
    for (const Json& key : schema.at("required")) {
      if (!key.is_string()) refuse(path + "/required", "'required' must list property names");
      required.insert(key.get<std::string>());
    }
  }
  static const Json kAnyValue = true;
  for (const std::string& key : required) {
    bool declared = false;
    for (const auto& property : properties) declared = declared || property.first == key;
    if (!declared) properties.emplace_back(key, &kAnyValue);  // required, any value
  }
  // A rule for one extra "key": value, or empty when none are allowed. Strict mode: declared
  // properties close the object unless additionalProperties opens it; an object schema that
  // declares none (`{"type": "object"}`) means any object.
  std::string extra;
  if (!schema.contains("additionalProperties") && !schema.contains("properties")) {
    extra = define(hint + "-extra", "json-string \":\" \" \"? json-value");
  } else if (schema.contains("additionalProperties")) {
    const Json& additional = schema.at("additionalProperties");
    if (!(additional.is_boolean() && !additional.get<bool>())) {
      std::string value = schema_rule(additional, path + "/additionalProperties", hint + "-additional", depth + 1);
      extra = define(hint + "-extra", "json-string \":\" \" \"? " + value);
    }
  }
  size_t n = properties.size();
  std::string first = extra.empty() ? "\"\"" : "(" + extra + " (\",\" \" \"? " + extra + ")*)?";
  std::string rest = extra.empty() ? "\"\"" : "(\",\" \" \"? " + extra + ")*";
  for (size_t i = n; i-- > 0;) {
    const auto& [key, value_schema] = properties[i];
    std::string value = schema_rule(*value_schema, path + "/properties/" + key, hint + "-" + key, depth + 1);
    std::string member = key_literal(key) + " \":\" \" \"? " + value;
    std::string rest_name = define(hint + "-rest", rest);
    bool is_required = required.count(key) > 0;
    std::string new_first = member + " " + rest_name;
    std::string new_rest = "\",\" \" \"? " + member + " " + rest_name;
    if (!is_required) {
      new_first = "(" + new_first + " | " + define(hint + "-first", first) + ")";
      new_rest = "(" + new_rest + " | " + rest_name + ")";
    }
    first = new_first;
    rest = new_rest;
  }
  return "\"{\" " + first + " \"}\"";
}

std::optional<size_t> size_keyword(const Json& schema, const char* keyword, const std::string& path) {
  if (!schema.contains(keyword)) return std::nullopt;
  const Json& v = schema.at(keyword);
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())) {
    refuse(path + "/" + keyword, std::string("'") + keyword + "' must be a non-negative integer");
  }
  double value = v.get<double>();
  if (value < 0) refuse(path + "/" + keyword, std::string("'") + keyword + "' must be a non-negative integer");
  if (value > 4096) refuse(path + "/" + keyword, std::string("'") + keyword + "' above 4096 is not supported");
  return static_cast<size_t>(value);
}

// "{m,n}" for GBNF: the count of further items after the first.
std::string repeat_suffix(size_t min, std::optional<size_t> max) {
  return "{" + std::to_string(min) + "," + (max ? std::to_string(*max) : "") + "}";
}

std::string SchemaConverter::array_body(const Json& schema, const std::string& path,
                                        const std::string& hint, int depth) {
  std::string item = "json-value";
  if (schema.contains("items")) {
    if (schema.at("items").is_array()) refuse(path + "/items", "unsupported keyword 'items' as an array (tuples)");
    item = schema_rule(schema.at("items"), path + "/items", hint + "-item", depth + 1);
  }
  size_t min = size_keyword(schema, "minItems", path).value_or(0);
  std::optional<size_t> max = size_keyword(schema, "maxItems", path);
  if (max && *max < min) refuse(path, "'maxItems' is below 'minItems'");
  if (max && *max == 0) return "\"[\" \"]\"";
  std::string more = "(\",\" \" \"? " + item + ")" +
                     repeat_suffix(min > 0 ? min - 1 : 0, max ? std::optional<size_t>(*max - 1) : std::nullopt);
  std::string items = item + " " + more;
  return "\"[\" " + (min == 0 ? "(" + items + ")?" : items) + " \"]\"";
}

// A string with a pattern or an enforced format, or with length bounds; the two kinds together
// would be an intersection of languages, which is refused.
std::string SchemaConverter::string_body(const Json& schema, const std::string& path) {
  std::optional<size_t> min = size_keyword(schema, "minLength", path);
  std::optional<size_t> max = size_keyword(schema, "maxLength", path);
  std::optional<std::string> pattern = format_pattern(schema);
  if (schema.contains("pattern")) {
    if (pattern) refuse(path, "unsupported keyword 'pattern' beside an enforced 'format'");
    if (!schema.at("pattern").is_string()) refuse(path + "/pattern", "'pattern' must be a string");
    pattern = schema.at("pattern").get<std::string>();
  }
  if (pattern) {
    if (min || max) refuse(path, "unsupported keyword 'minLength'/'maxLength' beside 'pattern' or 'format'");
    RegexGbnf regex = regex_to_gbnf(*pattern, /*inside_json_string=*/true);
    // A JSON Schema pattern matches anywhere in the string unless anchored.
    return std::string("\"\\\"\" ") + (regex.anchored_start ? "" : "json-char* ") + "(" +
           regex.expression + ")" + (regex.anchored_end ? "" : " json-char*") + " \"\\\"\"";
  }
  if (!min && !max) return "json-string";
  if (max && *max < min.value_or(0)) refuse(path, "'maxLength' is below 'minLength'");
  return "\"\\\"\" json-char" + repeat_suffix(min.value_or(0), max) + " \"\\\"\"";
}

// A lower or upper bound from minimum/maximum (inclusive) and exclusiveMinimum/exclusiveMaximum,
// as numbers (draft 6 on) or as booleans qualifying minimum/maximum (draft 4); the tighter wins.
std::optional<std::pair<double, bool>> read_bound(const Json& schema, const std::string& path, bool lower) {
  const char* inclusive = lower ? "minimum" : "maximum";
  const char* exclusive = lower ? "exclusiveMinimum" : "exclusiveMaximum";
  std::optional<std::pair<double, bool>> bound;
  if (schema.contains(inclusive)) {
    if (!schema.at(inclusive).is_number()) refuse(path + "/" + inclusive, std::string("'") + inclusive + "' must be a number");
    bool open = schema.contains(exclusive) && schema.at(exclusive).is_boolean() && schema.at(exclusive).get<bool>();
    bound = std::make_pair(schema.at(inclusive).get<double>(), open);
  }
  if (schema.contains(exclusive) && schema.at(exclusive).is_number()) {
    double e = schema.at(exclusive).get<double>();
    if (!bound || (lower ? e >= bound->first : e <= bound->first)) bound = std::make_pair(e, true);
  }
  if (bound && std::fabs(bound->first) > static_cast<double>(kMaxIntegerBound)) {
    refuse(path + "/" + inclusive, "bounds beyond +-10^18 are not supported");
  }
  return bound;
}

std::string SchemaConverter::integer_body(const Json& schema, const std::string& path) {
  auto whole = [&](bool lower) -> std::optional<int64_t> {
    auto bound = read_bound(schema, path, lower);
    if (!bound) return std::nullopt;
    double value = lower ? std::ceil(bound->first) : std::floor(bound->first);
    if (bound->second && value == bound->first) value += lower ? 1 : -1;
    return static_cast<int64_t>(value);
  };
  std::optional<int64_t> lo = whole(true), hi = whole(false);
  if (!lo && !hi) return "json-integer";
  try {
    return integer_range_gbnf(lo, hi);
  } catch (const Error& e) {
    refuse(path, e.what());
  }
}

// Bounds on decimals are enforced when they are integral (minimum 0, maximum 100); a bounded
// number is then written without an exponent.
std::string SchemaConverter::number_body(const Json& schema, const std::string& path) {
  auto integral = [&](bool lower) -> std::optional<NumberBound> {
    auto bound = read_bound(schema, path, lower);
    if (!bound) return std::nullopt;
    if (std::floor(bound->first) != bound->first) {
      refuse(path, std::string("unsupported keyword '") + (lower ? "minimum" : "maximum") +
                       "' with a fractional bound on type number (integral bounds are enforced)");
    }
    return NumberBound{static_cast<int64_t>(bound->first), bound->second};
  };
  std::optional<NumberBound> lo = integral(true), hi = integral(false);
  if (!lo && !hi) return "json-number";
  try {
    return number_range_gbnf(lo, hi);
  } catch (const Error& e) {
    refuse(path, e.what());
  }
}

}  // namespace

std::string json_schema_grammar(std::string_view schema_text) {
  const auto limit_depth = [](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxSchemaDepth + 8) {
      throw Error(ErrorCode::kInvalidArgument, "JSON schema: nested deeper than " +
                                                   std::to_string(kMaxSchemaDepth) + " levels");
    }
    return true;
  };
  Json schema;
  try {
    schema = Json::parse(schema_text, limit_depth);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string("JSON schema: invalid JSON: ") + e.what());
  }
  return SchemaConverter(schema).convert();
}

std::string json_object_grammar() { return "root ::= json-object\n" + json_value_rules(); }

std::string choice_grammar(const std::vector<std::string>& choices) {
  if (choices.empty()) throw Error(ErrorCode::kInvalidArgument, "choice grammar: no choices given");
  std::vector<std::string> parts;
  for (const std::string& choice : choices) {
    if (!is_valid_utf8(choice)) throw Error(ErrorCode::kInvalidArgument, "choice grammar: a choice is not valid UTF-8");
    parts.push_back(choice.empty() ? "\"\"" : gbnf_literal(choice));
  }
  std::string out = "root ::= ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + "\n";
}

}  // namespace flashq::grammar
