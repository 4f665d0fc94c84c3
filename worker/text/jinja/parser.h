// Tokens to a syntax tree, with the reference engine's grammar and operator precedence (filters
// and tests bind tighter than arithmetic; `not` looser than comparisons). Constructs outside the
// supported subset are refused here, by name and line, so that a template that parses renders.
#pragma once

#include <vector>

#include "worker/text/jinja/ast.h"
#include "worker/text/jinja/lexer.h"

namespace flashq::jinja {

// A syntax error is kInvalidArgument, an unsupported construct kUnsupported; both name the line.
NodePtr parse_program(const std::vector<Token>& tokens);

}  // namespace flashq::jinja
