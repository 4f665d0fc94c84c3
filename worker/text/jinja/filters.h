// Filters (`x|trim`, `x|tojson(indent=4)`) and tests (`x is string`), each as the reference
// engine defines it for each operand type; a filter applied to a type it does not handle is a
// render error there, and here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "worker/text/jinja/value.h"

namespace flashq::jinja {

struct FilterArguments {
  std::vector<Value> positional;
  Object keywords;
  bool all_string_literals = true;  // selectattr/rejectattr accept only literal strings
};

Value apply_filter(const std::string& name, bool called, const Value& operand, const FilterArguments& args);

// `operand is name`; `argument` is the value selectattr passes to equalto-style tests.
bool apply_test(const std::string& name, const Value& operand, const Value* argument = nullptr);

// upper/lower/capitalize of a string; text JavaScript maps other than character for character
// ("ß" to "SS") is refused (kUnsupported) rather than mapped differently.
std::string upper_case(const std::string& text);
std::string lower_case(const std::string& text);
std::string capitalized(const std::string& text);

// Ordering for sort and dictsort: numbers and booleans together, strings (lower-cased unless
// case_sensitive), none with none; other pairs are an error.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

}  // namespace flashq::jinja
