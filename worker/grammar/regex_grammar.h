// Regular expressions (the subset of docs/grammar.md) as GBNF. The same translation serves the
// regex output mode (the whole output matches) and JSON Schema's `pattern`, where the pattern
// speaks of the decoded string but the grammar must match its JSON-escaped text.
#pragma once

#include <string>
#include <string_view>

namespace flashq::grammar {

struct RegexGbnf {
  std::string expression;  // a GBNF expression, no rule definitions
  bool anchored_start = false;  // the pattern began with ^
  bool anchored_end = false;    // the pattern ended with $
};

// Throws kInvalidArgument naming the unsupported construct (backreferences, lookaround, \b,
// anchors other than a leading ^ and a trailing $, ...) or the syntax error.
RegexGbnf regex_to_gbnf(std::string_view pattern, bool inside_json_string);

// A whole grammar (`root ::= ...`) whose sentences are exactly the pattern's matches.
std::string regex_grammar(std::string_view pattern);

}  // namespace flashq::grammar
