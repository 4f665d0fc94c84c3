// Writing GBNF: literals and classes escaped so that parse_gbnf reads back exactly the given
// code points. Used by the generators (JSON Schema, regex, choices), which emit GBNF text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "worker/grammar/utf8_ranges.h"

namespace flashq::grammar {

// A quoted GBNF literal matching the UTF-8 text `text` (which must be valid UTF-8).
std::string gbnf_literal(std::string_view text);
// A GBNF class `[...]` matching the code points of `ranges` (non-empty).
std::string gbnf_class(const std::vector<CodePointRange>& ranges);
// `gbnf` with every rule name (definitions and references) prefixed by `prefix`, so that the
// rules of several generated grammars can be joined in one text without meeting.
std::string prefix_rule_names(std::string_view gbnf, std::string_view prefix);

}  // namespace flashq::grammar
