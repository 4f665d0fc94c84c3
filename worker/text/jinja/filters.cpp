#include "worker/text/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "worker/text/jinja/builtins.h"
#include "worker/text/jinja/js_text.h"

namespace flashq::jinja {
namespace {

const Value* argument(const FilterArguments& args, size_t index, const char* keyword) {
  if (index < args.positional.size()) return &args.positional[index];
  return args.keywords.find(keyword);
}

bool flag(const FilterArguments& args, size_t index, const char* keyword, const char* what) {
  const Value* v = argument(args, index, keyword);
  if (v == nullptr) return false;
  if (!v->is(Kind::kBool)) fail(std::string(what) + " must be a boolean");
  return v->boolean;
}

// A dotted path ("function.name", "items.0") into objects and arrays; undefined where it leads
// nowhere.
Value attribute_path(const Value& item, std::string_view path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (v.has_attributes()) {
      const Value* found = v.object->find(part);
      v = found ? *found : Value();
    } else if (v.is_array()) {
      const std::optional<double> index = js_parse_int(part);
      if (!index || *index < 0 || *index >= static_cast<double>(v.array->size())) return Value();
      v = (*v.array)[static_cast<size_t>(*index)];
    } else {
      return Value();
    }
    if (dot == std::string_view::npos) return v;
    start = dot + 1;
  }
}

std::string indent_lines(const std::string& text, const std::string& indent, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t end = text.find('\n', start);
    const std::string_view piece =
        std::string_view(text).substr(start, end == std::string::npos ? std::string::npos : end - start);
    if ((first || line != 0) && (blank || !piece.empty())) out += indent;
    out += piece;
    if (end == std::string::npos) return out;
    out += '\n';
    start = end + 1;
  }
}

Value tojson(const Value& operand, const FilterArguments& args) {
  JsonOptions options;
  if (const Value* indent = args.keywords.find("indent")) {
    if (indent->is(Kind::kInt)) {
      if (indent->number < 0 || indent->number > 1000)
        fail_unsupported("tojson(indent=" + js_number(indent->number) + ") is not supported");
      options.indent = static_cast<int>(indent->number);
    } else if (!indent->is(Kind::kNone)) {
      fail("If set, indent must be a number");
    }
  }
  if (const Value* ascii = args.keywords.find("ensure_ascii")) {
    if (!ascii->is(Kind::kBool)) fail("If set, ensure_ascii must be a boolean");
    options.ensure_ascii = ascii->boolean;
  }
  if (const Value* sort = args.keywords.find("sort_keys")) {
    if (!sort->is(Kind::kBool)) fail("If set, sort_keys must be a boolean");
    if (sort->boolean) fail_unsupported("tojson(sort_keys=true) is not supported");
  }
  if (const Value* separators = args.keywords.find("separators")) {
    if (separators->is_array()) {
      const Array& pair = *separators->array;
      if (pair.size() != 2 || !pair[0].is(Kind::kString) || !pair[1].is(Kind::kString)) {
        fail("separators must be a tuple of two strings");
      }
      options.has_separators = true;
      options.item_separator = pair[0].string;
      options.key_separator = pair[1].string;
    } else if (!separators->is(Kind::kNone)) {
      fail("If set, separators must be a tuple of two strings");
    }
  }
  return Value::from_string(to_json(operand, options));
}

Value unique(const Array& items) {
  Array out;
  for (const Value& item : items) {
    const bool seen = std::any_of(out.begin(), out.end(), [&](const Value& o) {
      return strict_equals(o, item) ||
             (o.is_number() && item.is_number() && std::isnan(o.number) && std::isnan(item.number));
    });
    if (!seen) out.push_back(item);
  }
  return Value::from_array(std::move(out));
}

Value sort(const Array& items, const FilterArguments& args) {
  const bool reverse = flag(args, 0, "reverse", "reverse");
  const bool case_sensitive = flag(args, 1, "case_sensitive", "case_sensitive");
  const Value* attribute = argument(args, 2, "attribute");
  std::string path;
  if (attribute != nullptr && !attribute->is(Kind::kNone)) {
    if (attribute->is(Kind::kString)) {
      path = attribute->string;
    } else if (attribute->is(Kind::kInt)) {
      path = js_number(attribute->number);
    } else {
      fail("attribute must be a string, integer, or null");
    }
  }
  const bool by_attribute = attribute != nullptr && !attribute->is(Kind::kNone);
  Array out = items;
  std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
    const int c = by_attribute ? compare_values(attribute_path(a, path), attribute_path(b, path), case_sensitive)
                               : compare_values(a, b, case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::from_array(std::move(out));
}

Value select_by_attribute(const std::string& name, const Array& items, const FilterArguments& args) {
  for (const Value& item : items) {
    if (!item.has_attributes()) fail("`" + name + "` can only be applied to array of objects");
  }
  if (!args.all_string_literals || !args.keywords.entries().empty() || args.positional.empty()) {
    fail("arguments of `" + name + "` must be strings");
  }
  const std::string& attr = args.positional[0].string;
  const Value* test = args.positional.size() > 1 ? &args.positional[1] : nullptr;
  const Value* test_argument = args.positional.size() > 2 ? &args.positional[2] : nullptr;
  Array out;
  for (const Value& item : items) {
    const Value* value = item.object->find(attr);
    bool result = false;
    if (value != nullptr) result = test ? apply_test(test->string, *value, test_argument) : truthy(*value);
    if (result == (name == "selectattr")) out.push_back(item);
  }
  return Value::from_array(std::move(out));
}

// select/reject(test, argument): Jinja's filters, which the reference engine lacks (the Llama 3.1
// template reaches them only with builtin_tools); the test is one the engine knows.
Value select_by_test(const std::string& name, const Value& operand, const FilterArguments& args) {
  if (!operand.is_array()) fail("Cannot apply filter \"" + name + "\" to type: " + type_name(operand));
  if (!args.keywords.entries().empty()) fail("`" + name + "` takes no keyword arguments");
  if (!args.positional.empty() && !args.positional[0].is(Kind::kString)) fail("`" + name + "` needs a test name");
  const Value* test_argument = args.positional.size() > 1 ? &args.positional[1] : nullptr;
  Array out;
  for (const Value& item : *operand.array) {
    const bool result =
        args.positional.empty() ? truthy(item) : apply_test(args.positional[0].string, item, test_argument);
    if (result == (name == "select")) out.push_back(item);
  }
  return Value::from_array(std::move(out));
}

Value map_attribute(const Array& items, const FilterArguments& args) {
  const Value* attr = args.keywords.find("attribute");
  if (attr == nullptr && args.positional.size() == 1 && args.positional[0].is(Kind::kString)) {
    Array out;
    for (const Value& item : items)
      out.push_back(apply_filter(args.positional[0].string, false, item, FilterArguments{}));
    return Value::from_array(std::move(out));
  }
  if (attr == nullptr) fail("`map` expressions without `attribute` set are not currently supported.");
  if (!attr->is(Kind::kString)) fail("attribute must be a string");
  const Value* fallback = args.keywords.find("default");
  Array out;
  for (const Value& item : items) {
    if (!item.has_attributes()) fail("items in map must be an object");
    Value v = attribute_path(item, attr->string);
    out.push_back(v.is(Kind::kUndefined) && fallback ? *fallback : v);
  }
  return Value::from_array(std::move(out));
}

Value join(const Value& operand, const FilterArguments& args) {
  std::vector<std::string> parts;
  if (operand.is(Kind::kString)) {
    parts = code_points(operand.string);
  } else if (operand.is_array()) {
    for (const Value& item : *operand.array) parts.push_back(to_plain_string(item));
  } else {
    fail("Cannot apply filter \"join\" to type: " + type_name(operand));
  }
  const Value* separator = argument(args, 0, "separator");
  if (separator != nullptr && !separator->is(Kind::kString)) fail("separator must be a string");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i > 0 && separator ? separator->string : "") + parts[i];
  return Value::from_string(std::move(out));
}

Value to_number(const std::string& name, const Value& operand, const FilterArguments& args) {
  const bool to_int = name == "int";
  const Value* fallback = argument(args, 0, "default");
  if (operand.is(Kind::kString)) {
    const std::optional<double> v = to_int ? js_parse_int(operand.string) : js_parse_float(operand.string);
    if (!v) return fallback ? *fallback : to_int ? Value::from_int(0) : Value::from_float(0);
    return to_int ? Value::from_int(*v) : Value::from_float(*v);
  }
  if (operand.is_number()) return operand;
  if (operand.is(Kind::kBool)) return to_int ? Value::from_int(operand.boolean) : Value::from_float(operand.boolean);
  fail("Cannot apply filter \"" + name + "\" to type: " + type_name(operand));
}

Value called_filter(const std::string& name, const Value& operand, const FilterArguments& args) {
  if (name == "tojson") return tojson(operand, args);
  if (name == "join") return join(operand, args);
  if (name == "int" || name == "float") return to_number(name, operand, args);
  if (name == "default") {
    const Value fallback = args.positional.empty() ? Value::from_string("") : args.positional[0];
    const bool boolean = flag(args, 1, "boolean", "`default` filter flag");
    return operand.is(Kind::kUndefined) || (boolean && !truthy(operand)) ? fallback : operand;
  }
  if (name == "select" || name == "reject") return select_by_test(name, operand, args);
  if (operand.is_array()) {
    if (name == "sort") return sort(*operand.array, args);
    if (name == "selectattr" || name == "rejectattr") return select_by_attribute(name, *operand.array, args);
    if (name == "map") return map_attribute(*operand.array, args);
    fail("Unknown ArrayValue filter: " + name);
  }
  if (operand.is(Kind::kString)) {
    if (name == "indent") {
      const Value* width = argument(args, 0, "width");
      if (width != nullptr && !width->is(Kind::kInt)) fail("width must be a number");
      if (width != nullptr && (width->number < 0 || width->number > 1000)) {
        fail_unsupported("indent(" + js_number(width->number) + ") is not supported");
      }
      const Value* first = argument(args, 1, "first");
      const Value* blank = argument(args, 2, "blank");
      const std::string indent(width ? static_cast<size_t>(width->number) : 4, ' ');
      return Value::from_string(indent_lines(operand.string, indent, first && truthy(*first), blank && truthy(*blank)));
    }
    if (name == "replace") {
      std::vector<Value> call_args = args.positional;
      call_args.push_back(Value::from_object(args.keywords, Kind::kKwargs));
      Scope unused;
      return (*builtin_member(operand, "replace")->function)(call_args, unused);
    }
    fail("Unknown StringValue filter: " + name);
  }
  if (operand.is_mapping()) {
    std::vector<Value> call_args = args.positional;
    if (args.keywords.size() > 0) call_args.push_back(Value::from_object(args.keywords, Kind::kKwargs));
    if (name == "dictsort") return object_dictsort(operand, call_args);
    if (name == "items") return object_items(operand);
    if (name == "keys") return object_keys(operand);
    if (name == "values") return object_values(operand);
    fail("Unknown ObjectValue filter: " + name);
  }
  fail("Cannot apply filter \"" + name + "\" to type: " + type_name(operand));
}

Value plain_filter(const std::string& name, const Value& operand) {
  if (name == "safe") return operand;
  if (name == "select" || name == "reject") return select_by_test(name, operand, FilterArguments{});
  if (name == "tojson") return Value::from_string(to_json(operand, JsonOptions{}));
  if (operand.is_array()) {
    const Array& items = *operand.array;
    if (name == "list") return operand;
    if (name == "first" || name == "last") {
      if (items.empty()) fail("'" + name + "' of an empty array");
      return name == "first" ? items.front() : items.back();
    }
    if (name == "length") return Value::from_int(static_cast<double>(items.size()));
    if (name == "reverse") return Value::from_array(Array(items.rbegin(), items.rend()));
    if (name == "sort") return sort(items, FilterArguments{});
    if (name == "join") return join(operand, FilterArguments{});
    if (name == "string") {
      JsonOptions options;
      options.undefined_as_null = false;
      return Value::from_string(to_json(operand, options));
    }
    if (name == "unique") return unique(items);
    fail("Unknown ArrayValue filter: " + name);
  }
  if (operand.is(Kind::kString)) {
    const std::string& s = operand.string;
    if (name == "length") return Value::from_int(static_cast<double>(utf16_length(s)));
    if (name == "upper") return Value::from_string(upper_case(s));
    if (name == "lower") return Value::from_string(lower_case(s));
    if (name == "title") return Value::from_string(js_title(s));
    if (name == "capitalize") return Value::from_string(capitalized(s));
    if (name == "trim") return Value::from_string(std::string(js_trim(s)));
    if (name == "indent") return Value::from_string(indent_lines(s, "    ", false, false));
    if (name == "join" || name == "string") return operand;
    if (name == "int" || name == "float") return to_number(name, operand, FilterArguments{});
    fail("Unknown StringValue filter: " + name);
  }
  if (operand.is_number()) {
    if (name == "abs")
      return operand.is(Kind::kInt) ? Value::from_int(std::fabs(operand.number))
                                    : Value::from_float(std::fabs(operand.number));
    if (name == "int") return Value::from_int(std::floor(operand.number));
    if (name == "float") return Value::from_float(operand.number);
    if (name == "string") return Value::from_string(to_output(operand));
    fail("Unknown NumericValue filter: " + name);
  }
  if (operand.is_mapping()) {
    if (name == "items") return object_items(operand);
    if (name == "length") return Value::from_int(static_cast<double>(operand.object->size()));
    std::vector<Value> no_args;
    if (name == "dictsort") return object_dictsort(operand, no_args);
    if (name == "keys") return object_keys(operand);
    if (name == "values") return object_values(operand);
    fail("Unknown ObjectValue filter: " + name);
  }
  if (operand.is(Kind::kBool)) {
    if (name == "bool") return operand;
    if (name == "int") return Value::from_int(operand.boolean ? 1 : 0);
    if (name == "float") return Value::from_float(operand.boolean ? 1 : 0);
    if (name == "string") return Value::from_string(operand.boolean ? "true" : "false");
    fail("Unknown BooleanValue filter: " + name);
  }
  fail("Cannot apply filter \"" + name + "\" to type: " + type_name(operand));
}

}  // namespace

std::string upper_case(const std::string& text) {
  std::optional<std::string> out = js_upper_simple(text);
  if (!out) fail_unsupported("upper-casing text with a character that becomes several is not supported");
  return *out;
}

std::string lower_case(const std::string& text) {
  std::optional<std::string> out = js_lower_simple(text);
  if (!out) fail_unsupported("lower-casing text with 'İ' or 'Σ' is not supported");
  return *out;
}

std::string capitalized(const std::string& text) {
  std::optional<std::string> out = js_capitalize_simple(text);
  if (!out) fail_unsupported("capitalizing text that starts with a character that becomes several is not supported");
  return *out;
}

Value apply_filter(const std::string& name, bool called, const Value& operand, const FilterArguments& args) {
  return called ? called_filter(name, operand, args) : plain_filter(name, operand);
}

bool apply_test(const std::string& name, const Value& operand, const Value* argument) {
  const Kind k = operand.kind;
  if (name == "boolean") return k == Kind::kBool;
  if (name == "callable") return k == Kind::kFunction;
  if (name == "odd" || name == "even") {
    if (k != Kind::kInt) fail("cannot " + name + " on " + type_name(operand));
    const bool even = std::fmod(operand.number, 2) == 0;
    return name == "even" ? even : !even;
  }
  if (name == "false") return k == Kind::kBool && !operand.boolean;
  if (name == "true") return k == Kind::kBool && operand.boolean;
  if (name == "none") return k == Kind::kNone;
  if (name == "string") return k == Kind::kString;
  if (name == "number") return operand.is_number();
  if (name == "integer") return k == Kind::kInt;
  if (name == "iterable") return (k == Kind::kArray && !operand.is_tuple) || k == Kind::kString;
  if (name == "mapping") return operand.is_mapping();
  if (name == "sequence") return k == Kind::kArray || operand.is_mapping() || k == Kind::kString;
  if (name == "lower") return k == Kind::kString && operand.string == lower_case(operand.string);
  if (name == "upper") return k == Kind::kString && operand.string == upper_case(operand.string);
  if (name == "defined") return k != Kind::kUndefined;
  if (name == "undefined") return k == Kind::kUndefined;
  if ((name == "equalto" || name == "eq") && argument != nullptr) return strict_equals(operand, *argument);
  fail("Unknown test: " + name);
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is(Kind::kNone) && b.is(Kind::kNone)) return 0;
  if (a.is(Kind::kNone) || b.is(Kind::kNone) || a.is(Kind::kUndefined) != b.is(Kind::kUndefined)) {
    fail("Cannot compare " + type_name(a) + " with " + type_name(b));
  }
  if (a.is(Kind::kUndefined)) return 0;
  const auto numeric = [](const Value& v) { return v.is_number() || v.is(Kind::kBool); };
  if (numeric(a) && numeric(b)) {
    const double x = a.is(Kind::kBool) ? a.boolean : a.number;
    const double y = b.is(Kind::kBool) ? b.boolean : b.number;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (type_name(a) != type_name(b)) fail("Cannot compare different types: " + type_name(a) + " and " + type_name(b));
  if (!a.is(Kind::kString)) fail("Cannot compare type: " + type_name(a));
  return case_sensitive ? compare_utf16(a.string, b.string) : compare_utf16(lower_case(a.string), lower_case(b.string));
}

}  // namespace flashq::jinja
