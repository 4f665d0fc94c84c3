// The subset of Jinja the chat template engine implements, by name: what the parser accepts and
// what it refuses as unsupported. Filters are listed in two forms because the reference engine
// (@huggingface/jinja) dispatches `x|f` and `x|f(...)` separately: each form is supported only
// where it renders there.
#pragma once

#include <string>

namespace flashq::jinja {

// Filters written without arguments (`x|trim`) and with them (`x|join(", ")`).
bool is_plain_filter(const std::string& name);
bool is_called_filter(const std::string& name);
// Tests (`x is string`), none of which takes an argument.
bool is_supported_test(const std::string& name);
// Tests that compare with an argument, reachable only through selectattr/select:
// `xs|selectattr('role', 'equalto', 'tool')`.
bool is_comparison_test(const std::string& name);
// Methods of strings and objects (`s.startswith(...)`, `d.items()`).
bool is_supported_method(const std::string& name);
// Jinja statements and global functions that exist but that the engine does not implement.
bool is_unsupported_statement(const std::string& name);
bool is_unsupported_global(const std::string& name);

}  // namespace flashq::jinja
