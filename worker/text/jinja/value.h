// The values a chat template computes with: undefined, none, booleans, integers and floats (both
// JavaScript numbers, as in the reference engine), strings, arrays (tuples are arrays that remember
// they were written as tuples), objects with insertion-ordered keys, namespaces (the one mutable
// object) and functions (macros and built-ins). Arrays, objects and namespaces are shared by
// reference, so `==` on them is identity, as it is in the reference engine.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/error.h"

namespace flashq::jinja {

struct Value;
class Scope;

using Array = std::vector<Value>;

class Object;

// A callable: receives the positional arguments, with a kKwargs object last when the call named
// any, and the scope of the call (macros see their caller's variables, as in the reference engine).
using Function = std::function<Value(std::vector<Value>& args, Scope& caller)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kKwargs, kNamespace, kFunction };

struct Value {
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  bool is_tuple = false;  // an array written as a tuple literal
  int depth = 0;          // containers nested inside this one (bounded by kMaxValueDepth)
  double number = 0;      // kInt holds an integral value
  std::string string;
  std::shared_ptr<Array> array;
  std::shared_ptr<Object> object;  // kObject, kKwargs, kNamespace
  std::shared_ptr<const Function> function;

  static Value none() { return with_kind(Kind::kNone); }
  static Value from_bool(bool b) {
    Value v = with_kind(Kind::kBool);
    v.boolean = b;
    return v;
  }
  static Value from_int(double n) {
    Value v = with_kind(Kind::kInt);
    v.number = n;
    return v;
  }
  static Value from_float(double n) {
    Value v = with_kind(Kind::kFloat);
    v.number = n;
    return v;
  }
  static Value from_string(std::string s) {
    Value v = with_kind(Kind::kString);
    v.string = std::move(s);
    return v;
  }
  static Value from_array(Array items, bool tuple = false);
  static Value from_object(Object entries, Kind kind = Kind::kObject);
  static Value from_function(Function f);
  // A JSON value as the reference engine sees it after JSON.parse: an integral number is an
  // integer; array-index keys ("0", "17") of an object come first, ascending.
  static Value from_json(const nlohmann::ordered_json& json, int depth = 0);

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_array() const { return kind == Kind::kArray; }
  // Objects in the narrow sense that have get/items/keys/values (kwargs objects included).
  bool is_mapping() const { return kind == Kind::kObject || kind == Kind::kKwargs; }
  // Anything with attributes looked up by name: objects and namespaces.
  bool has_attributes() const { return is_mapping() || kind == Kind::kNamespace; }

 private:
  static Value with_kind(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

// Insertion-ordered string-keyed map; small enough in templates for a linear search.
class Object {
 public:
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

// Deeper than any real template or conversation, so that printing and freeing a value cannot
// exhaust the stack.
constexpr int kMaxValueDepth = 200;

// An error the template causes while rendering; the evaluator adds the line. kUnsupported marks a
// value the engine will not print rather than print differently from the reference.
struct RenderError {
  ErrorCode code;
  std::string message;
};
[[noreturn]] void fail(std::string message);
[[noreturn]] void fail_unsupported(std::string message);

// The reference engine's type names, as its error messages spell them (StringValue, ...).
std::string type_name(const Value& v);

// Whether `v` holds a namespace at any depth (a namespace stored in itself would be a cycle).
bool contains_namespace(const Value& v);

// Python-like truthiness as the reference engine defines it (a namespace is always true).
bool truthy(const Value& v);

// How `{{ v }}` prints v (the reference engine's toString): integers without ".0", integral floats
// with it, true/false, arrays and objects as JSON with undefined printed as "undefined".
std::string to_output(const Value& v);

// How `~`, `+` with a string, and join stringify a value (JavaScript's String(v.value)): floats
// lose ".0"; an array is its elements printed as {{ }} would, joined with ","; none and undefined
// are "" (only join reaches them). Objects are refused rather than printed as "[object Map]".
std::string to_plain_string(const Value& v);

struct JsonOptions {
  int indent = 0;  // 0: one line
  bool ensure_ascii = false;
  bool has_separators = false;
  std::string item_separator;
  std::string key_separator;
  bool undefined_as_null = true;
};
// tojson: ", " and ": " separators on one line, "," and ": " when indenting.
std::string to_json(const Value& v, const JsonOptions& options, int depth = 0);

// `==` as the reference engine evaluates it (JavaScript's loose equality on the underlying
// values): numbers and booleans compare as numbers, none equals undefined, containers by identity.
bool loose_equals(const Value& a, const Value& b);
// `===` on the underlying values (membership in arrays, unique, the equalto test).
bool strict_equals(const Value& a, const Value& b);

}  // namespace flashq::jinja
