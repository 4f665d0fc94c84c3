#include "worker/text/jinja/subset.h"

#include <algorithm>
#include <initializer_list>

namespace flashq::jinja {
namespace {

bool one_of(const std::string& name, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

}  // namespace

// Filters the engine renders written without arguments (`x|trim`) and with them (`x|join(", ")`);
// the two sets differ because the reference engine dispatches the two forms separately.
bool is_plain_filter(const std::string& name) {
  return one_of(name, {"safe",   "tojson", "select", "reject", "list",  "first", "last",     "length",     "reverse",
                       "sort",   "join",   "string", "unique", "upper", "lower", "title",    "capitalize", "trim",
                       "indent", "int",    "float",  "abs",    "items", "bool",  "dictsort", "keys",       "values"});
}
bool is_called_filter(const std::string& name) {
  return one_of(name, {"tojson", "join", "int", "float", "default", "sort", "selectattr", "rejectattr", "map", "indent",
                       "replace", "items", "dictsort", "keys", "values", "select", "reject"});
}
bool is_supported_test(const std::string& name) {
  return one_of(name, {"boolean", "callable", "odd", "even", "false", "true", "none", "string", "number", "integer",
                       "iterable", "mapping", "sequence", "lower", "upper", "defined", "undefined"});
}
// Methods of strings and objects (`s.startswith(...)`, `d.items()`).
bool is_supported_method(const std::string& name) {
  return one_of(name, {"upper", "lower", "strip", "title", "capitalize", "rstrip", "lstrip", "startswith", "endswith",
                       "split", "replace", "get", "items", "keys", "values", "dictsort"});
}
// Jinja statements and globals the engine does not implement, refused by name.
bool is_unsupported_statement(const std::string& name) {
  return one_of(name, {"include", "extends", "block", "with", "raw", "import", "from", "autoescape", "do", "call",
                       "filter", "trans", "pluralize", "print"});
}
bool is_unsupported_global(const std::string& name) { return one_of(name, {"dict", "lipsum", "cycler", "joiner"}); }
bool is_comparison_test(const std::string& name) { return one_of(name, {"equalto", "eq"}); }

}  // namespace flashq::jinja
