#include "worker/grammar/json_text.h"

#include <cstdio>

#include "worker/text/utf8.h"

namespace flashq::grammar {

std::string json_escaped(char32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (cp < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
    return buf;
  }
  std::string out;
  append_utf8(out, cp);
  return out;
}

// Separators are "," and ":" each followed by at most one space; nothing else between tokens.
// The bound keeps a model from filling its budget with whitespace, and both compact JSON and
// Python's default json.dumps output are sentences.
const std::string& json_value_rules() {
  static const std::string rules = R"(json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" (json-string ":" " "? json-value ("," " "? json-string ":" " "? json-value)*)? "}"
json-array ::= "[" (json-value ("," " "? json-value)*)? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-integer ::= "-"? ("0" | [1-9] [0-9]*)
json-number ::= json-integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
json-boolean ::= "true" | "false"
json-null ::= "null"
)";
  return rules;
}

}  // namespace flashq::grammar
