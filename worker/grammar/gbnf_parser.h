// GBNF, llama.cpp's grammar text, parsed into a Grammar. The subset (docs/grammar.md): rules
// `name ::= alternatives`, string literals, character classes `[a-z]` `[^"]`, `.`, groups,
// `*` `+` `?` `{m}` `{m,}` `{m,n}`, `#` comments. Literals and classes are code points (UTF-8);
// \xHH, \uHHHH and \UHHHHHHHH name code points as in llama.cpp.
#pragma once

#include <string_view>

#include "worker/grammar/grammar.h"

namespace flashq::grammar {

// Largest repetition count accepted in `{m,n}`.
inline constexpr int kMaxRepetition = 4096;

// Throws kInvalidArgument naming the line and column of a syntax error, an undefined rule, a
// left-recursive rule or a limit exceeded.
Grammar parse_gbnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace flashq::grammar
