#include "worker/text/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "worker/text/jinja/js_text.h"

namespace flashq::jinja {
namespace {

// An ECMAScript array index ("0", "17", not "01" or "-1"), which JavaScript objects order first.
bool is_array_index(const std::string& key) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return false;
  for (char c : key) {
    if (c < '0' || c > '9') return false;
  }
  return std::stoull(key) < 4294967295ull;
}

}  // namespace

const Value* Object::find(std::string_view key) const {
  for (const auto& entry : entries_) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void Object::set(const std::string& key, Value value) {
  for (auto& entry : entries_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(value));
}

namespace {

int nested_depth(int child_depth) {
  if (child_depth + 1 > kMaxValueDepth) fail("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  return child_depth + 1;
}

}  // namespace

Value Value::from_array(Array items, bool tuple) {
  Value v = with_kind(Kind::kArray);
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth);
  v.depth = nested_depth(deepest);
  v.array = std::make_shared<Array>(std::move(items));
  v.is_tuple = tuple;
  return v;
}

Value Value::from_object(Object entries, Kind kind) {
  Value v = with_kind(kind);
  int deepest = 0;
  for (const auto& entry : entries.entries()) deepest = std::max(deepest, entry.second.depth);
  v.depth = nested_depth(deepest);
  v.object = std::make_shared<Object>(std::move(entries));
  return v;
}

Value Value::from_function(Function f) {
  Value v = with_kind(Kind::kFunction);
  v.function = std::make_shared<const Function>(std::move(f));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) fail("the context is nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return from_bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return from_int(static_cast<double>(json.get<int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned:
      return from_int(static_cast<double>(json.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = json.get<double>();
      return std::isfinite(d) && d == std::floor(d) ? from_int(d) : from_float(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return from_string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      for (const auto& item : json) items.push_back(from_json(item, depth + 1));
      return from_array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<unsigned long long, std::string>> index_keys;
      for (auto it = json.begin(); it != json.end(); ++it) {
        if (is_array_index(it.key())) index_keys.emplace_back(std::stoull(it.key()), it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      Object entries;
      for (const auto& key : index_keys) entries.set(key.second, from_json(json.at(key.second), depth + 1));
      for (auto it = json.begin(); it != json.end(); ++it) {
        if (!is_array_index(it.key())) entries.set(it.key(), from_json(it.value(), depth + 1));
      }
      return from_object(std::move(entries));
    }
    default:
      fail_unsupported("a binary JSON value cannot be a template variable");
  }
}

void fail(std::string message) { throw RenderError{ErrorCode::kInvalidArgument, std::move(message)}; }
void fail_unsupported(std::string message) { throw RenderError{ErrorCode::kUnsupported, std::move(message)}; }

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return "UndefinedValue";
    case Kind::kNone:
      return "NullValue";
    case Kind::kBool:
      return "BooleanValue";
    case Kind::kInt:
      return "IntegerValue";
    case Kind::kFloat:
      return "FloatValue";
    case Kind::kString:
      return "StringValue";
    case Kind::kArray:
      return v.is_tuple ? "TupleValue" : "ArrayValue";
    case Kind::kObject:
      return "ObjectValue";
    case Kind::kKwargs:
      return "KeywordArgumentsValue";
    case Kind::kNamespace:
      return "NamespaceValue";
    case Kind::kFunction:
      return "FunctionValue";
  }
  return "?";
}

bool contains_namespace(const Value& v) {
  if (v.is(Kind::kNamespace)) return true;
  if (v.is_array()) {
    for (const Value& item : *v.array) {
      if (item.depth > 0 && contains_namespace(item)) return true;
    }
  }
  if (v.is_mapping()) {
    for (const auto& entry : v.object->entries()) {
      if (entry.second.depth > 0 && contains_namespace(entry.second)) return true;
    }
  }
  return false;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return v.boolean;
    case Kind::kInt:
    case Kind::kFloat:
      return v.number != 0 && !std::isnan(v.number);
    case Kind::kString:
      return !v.string.empty();
    case Kind::kArray:
      return !v.array->empty();
    case Kind::kObject:
    case Kind::kKwargs:
      return v.object->size() > 0;
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string to_output(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "null";
    case Kind::kBool:
      return v.boolean ? "true" : "false";
    case Kind::kInt:
      return js_number(v.number);
    case Kind::kFloat:
      if (v.number == 0 && std::signbit(v.number)) return "-0.0";
      if (std::isfinite(v.number) && v.number == std::floor(v.number) && std::fabs(v.number) < 1e21) {
        return js_number(v.number) + ".0";
      }
      return js_number(v.number);
    case Kind::kString:
      return v.string;
    case Kind::kArray:
      if (v.is_tuple) fail("Cannot convert to JSON: TupleValue");
      [[fallthrough]];
    case Kind::kObject:
    case Kind::kNamespace: {
      JsonOptions options;
      options.undefined_as_null = false;
      return to_json(v, options);
    }
    case Kind::kKwargs:
      fail("Cannot convert to JSON: KeywordArgumentsValue");
    case Kind::kFunction:
      fail_unsupported("printing a function is not supported");
  }
  return "";
}

std::string to_plain_string(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return "";
    case Kind::kBool:
      return v.boolean ? "true" : "false";
    case Kind::kInt:
    case Kind::kFloat:
      return js_number(v.number);
    case Kind::kString:
      return v.string;
    case Kind::kArray: {
      // JavaScript's Array.prototype.toString: the elements' own printing, joined with ",".
      std::string out;
      for (size_t i = 0; i < v.array->size(); ++i) out += (i > 0 ? "," : "") + to_output((*v.array)[i]);
      return out;
    }
    default:
      fail_unsupported("joining " + type_name(v) +
                       " into a string is not supported (the reference engine writes \"[object Map]\")");
  }
}

std::string to_json(const Value& v, const JsonOptions& options, int depth) {
  std::string item_sep = options.has_separators ? options.item_separator : options.indent > 0 ? "," : ", ";
  std::string key_sep = options.has_separators ? options.key_separator : ": ";
  switch (v.kind) {
    case Kind::kNone:
      return "null";
    case Kind::kUndefined:
      return options.undefined_as_null ? "null" : "undefined";
    case Kind::kInt:
    case Kind::kFloat:
      return std::isfinite(v.number) ? js_number(v.number) : "null";
    case Kind::kBool:
      return v.boolean ? "true" : "false";
    case Kind::kString: {
      std::string quoted = json_quote(v.string);
      return options.ensure_ascii ? json_ascii_escape(quoted) : quoted;
    }
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kNamespace: {
      if (v.kind == Kind::kArray && v.is_tuple) fail("Cannot convert to JSON: TupleValue");
      const std::string unit(static_cast<size_t>(options.indent), ' ');
      std::string base = "\n";
      for (int i = 0; i < depth; ++i) base += unit;
      const std::string child = base + unit;
      const bool indent = options.indent > 0;
      std::vector<std::string> core;
      if (v.kind == Kind::kArray) {
        for (const Value& item : *v.array) core.push_back(to_json(item, options, depth + 1));
      } else {
        for (const auto& [key, value] : v.object->entries()) {
          std::string k = json_quote(key);
          if (options.ensure_ascii) k = json_ascii_escape(k);
          core.push_back((indent ? child : "") + k + key_sep + to_json(value, options, depth + 1));
        }
      }
      std::string out = v.kind == Kind::kArray ? "[" : "{";
      if (v.kind == Kind::kArray && indent && !core.empty()) out += child;
      for (size_t i = 0; i < core.size(); ++i) {
        if (i > 0) out += item_sep + (v.kind == Kind::kArray && indent ? child : "");
        out += core[i];
      }
      if (indent && !core.empty()) out += base;
      out += v.kind == Kind::kArray ? "]" : "}";
      return out;
    }
    default:
      fail("Cannot convert to JSON: " + type_name(v));
  }
}

bool strict_equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number == b.number;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return a.boolean == b.boolean;
    case Kind::kString:
      return a.string == b.string;
    case Kind::kArray:
      return a.array == b.array;
    case Kind::kObject:
    case Kind::kKwargs:
    case Kind::kNamespace:
      return a.object == b.object;
    case Kind::kFunction:
      return a.function == b.function;
    default:
      return false;
  }
}

bool loose_equals(const Value& a, const Value& b) {
  const auto nullish = [](const Value& v) { return v.is(Kind::kNone) || v.is(Kind::kUndefined); };
  if (nullish(a) || nullish(b)) return nullish(a) && nullish(b);
  const auto primitive = [](const Value& v) { return v.is_number() || v.is(Kind::kBool) || v.is(Kind::kString); };
  if (primitive(a) && primitive(b)) {
    if (a.is(Kind::kString) && b.is(Kind::kString)) return a.string == b.string;
    const auto as_number = [](const Value& v) -> std::optional<double> {
      if (v.is(Kind::kBool)) return v.boolean ? 1.0 : 0.0;
      if (v.is(Kind::kString)) return js_to_number(v.string);
      return v.number;
    };
    const auto x = as_number(a);
    const auto y = as_number(b);
    return x && y && *x == *y;
  }
  if (primitive(a) || primitive(b)) return false;  // a container against a primitive
  return strict_equals(a, b);
}

}  // namespace flashq::jinja
