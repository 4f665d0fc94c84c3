// Renders a parsed template: statements to text, expressions to values, with the reference
// engine's semantics for scopes (a for loop and a macro call open one; a macro sees its caller's
// variables), loops (loop.*, for-else, break/continue), and operators.
#pragma once

#include <string>

#include "worker/text/jinja/ast.h"
#include "worker/text/jinja/scope.h"
#include "worker/text/jinja/template.h"

namespace flashq::jinja {

// Renders `program` with `globals` as the outermost scope. Errors are flashq::Errors naming the
// line: kInvalidArgument for what the template raised or got wrong, kUnsupported for a value the
// engine will not print.
std::string render_program(const Node& program, Scope& globals, const RenderOptions& options);

}  // namespace flashq::jinja
