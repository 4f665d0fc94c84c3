// How the JSON grammars write text: the one escaped form each character gets inside a string
// (the form of Python's json.dumps and nlohmann::json::dump: \" \\ \b \f \n \r \t, other control
// characters as lowercase \u00xx, everything else as itself), and the GBNF rules for JSON values.
#pragma once

#include <string>

namespace flashq::grammar {

std::string json_escaped(char32_t cp);

// GBNF rules json-string, json-char, json-integer, json-number, json-boolean, json-null,
// json-value, json-object, json-array under the whitespace policy of docs/grammar.md.
const std::string& json_value_rules();

}  // namespace flashq::grammar
