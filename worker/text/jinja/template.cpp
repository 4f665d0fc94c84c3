#include "worker/text/jinja/template.h"

#include "worker/text/jinja/ast.h"
#include "worker/text/jinja/builtins.h"
#include "worker/text/jinja/evaluator.h"
#include "worker/text/jinja/lexer.h"
#include "worker/text/jinja/parser.h"
#include "worker/text/jinja/scope.h"

namespace flashq::jinja {

Template Template::parse(std::string_view source) {
  std::shared_ptr<const Node> program(parse_program(tokenize(source)).release());
  return Template(std::move(program));
}

std::string Template::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render(nlohmann::ordered_json(context), options);
}

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object()) throw Error(ErrorCode::kInvalidArgument, "chat template context must be a JSON object");
  Scope globals;
  declare_globals(globals, options);
  Value variables;
  try {
    variables = Value::from_json(context);
  } catch (const RenderError& e) {
    throw Error(e.code, "chat template: " + e.message);
  }
  for (const auto& [name, value] : variables.object->entries()) {
    // The reference engine refuses to redeclare its globals (true, range, namespace, ...).
    if (globals.declared_here(name)) {
      throw Error(ErrorCode::kInvalidArgument, "chat template variable '" + name + "' shadows a built-in");
    }
    globals.set(name, value);
  }
  return render_program(*program_, globals, options);
}

}  // namespace flashq::jinja
