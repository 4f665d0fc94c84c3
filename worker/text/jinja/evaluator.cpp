#include "worker/text/jinja/evaluator.h"

#include <algorithm>
#include <cmath>

#include "worker/text/jinja/builtins.h"
#include "worker/text/jinja/filters.h"
#include "worker/text/jinja/js_text.h"

namespace flashq::jinja {
namespace {

// Thrown by {% break %} and {% continue %}; the output of the interrupted iteration is dropped,
// as in the reference engine.
struct LoopBreak {};
struct LoopContinue {};

// Python slicing over `size` elements, as the reference engine clamps it.
std::vector<size_t> slice_indices(size_t size, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const double n = static_cast<double>(size);
  const double step = step_v.is(Kind::kUndefined) ? 1 : step_v.number;
  const int direction = step > 0 ? 1 : step < 0 ? -1 : 0;
  double start;
  double stop;
  if (direction >= 0) {
    start = start_v.is(Kind::kUndefined) ? 0 : start_v.number;
    start = start < 0 ? std::max(n + start, 0.0) : std::min(start, n);
    stop = stop_v.is(Kind::kUndefined) ? n : stop_v.number;
    stop = stop < 0 ? std::max(n + stop, 0.0) : std::min(stop, n);
  } else {
    start = start_v.is(Kind::kUndefined) ? n - 1 : start_v.number;
    start = start < 0 ? std::max(n + start, -1.0) : std::min(start, n - 1);
    stop = stop_v.is(Kind::kUndefined) ? -1 : stop_v.number;
    stop = stop < -1 ? std::max(n + stop, -1.0) : std::min(stop, n - 1);
  }
  std::vector<size_t> out;
  for (double i = start; direction * i < direction * stop; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

// Deeper than any real template, so that runaway recursion fails instead of exhausting the stack.
constexpr int kMaxMacroDepth = 100;
// Longer than any real template builds with `+`, so that doubling an array in a loop fails early.
constexpr size_t kMaxArrayLength = 1000000;

class Evaluator {
 public:
  explicit Evaluator(const RenderOptions& options) : options_(options) {}

  std::string block(const std::vector<NodePtr>& statements, Scope& scope) {
    std::string out;
    for (const NodePtr& statement : statements) {
      Value v;
      try {
        v = eval(*statement, scope);
      } catch (const RenderError& e) {
        throw Error(e.code, "chat template line " + std::to_string(statement->line) + ": " + e.message);
      }
      if (!v.is(Kind::kNone) && !v.is(Kind::kUndefined)) {
        try {
          out += to_output(v);
          check_size(out);
        } catch (const RenderError& e) {
          throw Error(e.code, "chat template line " + std::to_string(statement->line) + ": " + e.message);
        }
      }
    }
    return out;
  }

 private:
  Value eval(const Node& node, Scope& scope) {
    switch (node.kind) {
      case NodeKind::kProgram:
        return Value::from_string(block(node.body, scope));
      case NodeKind::kText:
        return Value::from_string(node.text);
      case NodeKind::kComment:
        return Value::none();
      case NodeKind::kIf:
        return Value::from_string(block(truthy(eval(*node.a, scope)) ? node.body : node.orelse, scope));
      case NodeKind::kFor:
        return for_loop(node, scope);
      case NodeKind::kSet:
        return set(node, scope);
      case NodeKind::kMacro:
        return define_macro(node, scope);
      case NodeKind::kBreak:
        throw LoopBreak{};
      case NodeKind::kContinue:
        throw LoopContinue{};
      case NodeKind::kInteger:
        return Value::from_int(node.number);
      case NodeKind::kFloat:
        return Value::from_float(node.number);
      case NodeKind::kString:
        return Value::from_string(node.text);
      case NodeKind::kIdentifier:
        return scope.lookup(node.text);
      case NodeKind::kArray:
      case NodeKind::kTuple: {
        Array items;
        for (const NodePtr& item : node.items) items.push_back(eval(*item, scope));
        return Value::from_array(std::move(items), node.kind == NodeKind::kTuple);
      }
      case NodeKind::kObject: {
        Object entries;
        for (size_t i = 0; i < node.items.size(); ++i) {
          Value key = eval(*node.items[i], scope);
          if (!key.is(Kind::kString)) fail("Object keys must be strings: got " + type_name(key));
          entries.set(key.string, eval(*node.values[i], scope));
        }
        return Value::from_object(std::move(entries));
      }
      case NodeKind::kMember:
        return member(node, scope);
      case NodeKind::kCall:
        return call(node, scope);
      case NodeKind::kUnary:
        return unary(node, scope);
      case NodeKind::kBinary:
        return binary(node, scope);
      case NodeKind::kFilter: {
        Value operand = eval(*node.a, scope);
        FilterArguments args;
        for (const NodePtr& arg : node.items) {
          args.all_string_literals = args.all_string_literals && arg->kind == NodeKind::kString;
          if (arg->kind == NodeKind::kKeyword) {
            if (args.keywords.find(arg->text)) fail("Got multiple values for keyword argument '" + arg->text + "'");
            args.keywords.set(arg->text, eval(*arg->a, scope));
          } else {
            args.positional.push_back(eval(*arg, scope));
          }
        }
        return checked(apply_filter(node.text, node.called, operand, args));
      }
      case NodeKind::kTest: {
        const bool result = apply_test(node.text, eval(*node.a, scope));
        return Value::from_bool(node.negated ? !result : result);
      }
      case NodeKind::kSelect:
        return truthy(eval(*node.b, scope)) ? eval(*node.a, scope) : Value();
      case NodeKind::kTernary:
        return truthy(eval(*node.a, scope)) ? eval(*node.b, scope) : eval(*node.c, scope);
      case NodeKind::kSlice:
      case NodeKind::kKeyword:
        break;
    }
    fail("unexpected expression");
  }

  Value for_loop(const Node& node, Scope& outer) {
    Scope scope(&outer);
    Value iterable = eval(*node.b, scope);
    if (iterable.is_mapping()) iterable = object_keys(iterable);
    if (!iterable.is_array()) fail("Expected iterable or object type in for loop: got " + type_name(iterable));
    const Array source = *iterable.array;  // a copy: the body may not change what is iterated
    const auto bind = [&](Scope& target, const Value& item) {
      if (node.a->kind == NodeKind::kIdentifier) {
        target.set(node.a->text, item);
        return;
      }
      if (!item.is_array() || item.is_tuple) fail("Cannot unpack non-iterable type: " + type_name(item));
      if (item.array->size() != node.a->items.size()) {
        fail(std::string("Too ") + (node.a->items.size() > item.array->size() ? "few" : "many") + " items to unpack");
      }
      for (size_t j = 0; j < node.a->items.size(); ++j) target.set(node.a->items[j]->text, (*item.array)[j]);
    };
    Array items;
    for (const Value& item : source) {
      if (node.c) {
        Scope test_scope(&scope);
        bind(test_scope, item);
        if (!truthy(eval(*node.c, test_scope))) continue;
      }
      items.push_back(item);
    }
    std::string out;
    bool iterated = false;
    const size_t n = items.size();
    for (size_t i = 0; i < n; ++i) {
      if (++iterations_ > options_.max_loop_iterations) {
        fail("loops ran more than " + std::to_string(options_.max_loop_iterations) + " iterations");
      }
      Object loop;
      loop.set("index", Value::from_int(static_cast<double>(i + 1)));
      loop.set("index0", Value::from_int(static_cast<double>(i)));
      loop.set("revindex", Value::from_int(static_cast<double>(n - i)));
      loop.set("revindex0", Value::from_int(static_cast<double>(n - i - 1)));
      loop.set("first", Value::from_bool(i == 0));
      loop.set("last", Value::from_bool(i == n - 1));
      loop.set("length", Value::from_int(static_cast<double>(n)));
      loop.set("previtem", i > 0 ? items[i - 1] : Value());
      loop.set("nextitem", i + 1 < n ? items[i + 1] : Value());
      scope.set("loop", Value::from_object(std::move(loop)));
      bind(scope, items[i]);
      try {
        out += block(node.body, scope);
      } catch (const LoopContinue&) {
        continue;
      } catch (const LoopBreak&) {
        break;
      }
      iterated = true;
    }
    if (!iterated) out += block(node.orelse, scope);
    return Value::from_string(std::move(out));
  }

  Value set(const Node& node, Scope& scope) {
    Value value = node.b ? eval(*node.b, scope) : Value::from_string(block(node.body, scope));
    const Node& target = *node.a;
    if (target.kind == NodeKind::kIdentifier) {
      scope.set(target.text, std::move(value));
    } else if (target.kind == NodeKind::kTuple) {
      if (!value.is_array()) fail("Cannot unpack non-iterable type in set: " + type_name(value));
      if (value.array->size() != target.items.size()) {
        fail(std::string("Too ") + (target.items.size() > value.array->size() ? "few" : "many") +
             " items to unpack in set");
      }
      for (size_t i = 0; i < target.items.size(); ++i) {
        if (target.items[i]->kind != NodeKind::kIdentifier) fail("Cannot unpack to non-identifier in set");
        scope.set(target.items[i]->text, (*value.array)[i]);
      }
    } else {
      Value object = eval(*target.a, scope);
      if (!object.is(Kind::kNamespace)) fail("cannot assign attribute on non-namespace object");
      if (target.b->kind != NodeKind::kIdentifier) fail("Cannot assign to member with non-identifier property");
      // The one mutation there is: a namespace holding a namespace could hold itself, a cycle
      // that printing would never leave; and it must not grow deeper than any value may.
      if (contains_namespace(value)) fail_unsupported("storing a namespace in a namespace is not supported");
      if (value.depth + 1 > kMaxValueDepth)
        fail("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
      object.object->set(target.b->text, std::move(value));
    }
    return Value::none();
  }

  Value define_macro(const Node& node, Scope& scope) {
    const Node* macro = &node;
    scope.set(node.text, Value::from_function([this, macro](std::vector<Value>& args, Scope& caller) {
                if (macro_depth_ >= kMaxMacroDepth)
                  fail("macro calls nested deeper than " + std::to_string(kMaxMacroDepth) + " levels");
                ++macro_depth_;
                struct Leave {
                  int& depth;
                  ~Leave() { --depth; }
                } leave{macro_depth_};
                Scope local(&caller);
                Object keywords;
                if (!args.empty() && args.back().is(Kind::kKwargs)) {
                  keywords = *args.back().object;
                  args.pop_back();
                }
                std::vector<const Node*> pending_defaults;
                for (size_t i = 0; i < macro->params.size(); ++i) {
                  const Node& param = *macro->params[i];
                  std::optional<Value> value;
                  if (i < args.size()) {
                    value = args[i];
                  } else if (const Value* named = keywords.find(param.text)) {
                    value = *named;
                    Object rest;
                    for (const auto& [k, v] : keywords.entries()) {
                      if (k != param.text) rest.set(k, v);
                    }
                    keywords = std::move(rest);
                  }
                  if (!value && param.a) pending_defaults.push_back(&param);
                  local.set(param.text, value ? *value : Value());
                }
                if (keywords.size() > 0) {
                  fail("macro '" + macro->text + "' takes no keyword argument '" + keywords.entries()[0].first + "'");
                }
                if (args.size() > macro->params.size()) {
                  fail("macro '" + macro->text + "' takes not more than " + std::to_string(macro->params.size()) +
                       " argument(s)");
                }
                for (const Node* param : pending_defaults) local.set(param->text, eval(*param->a, local));
                return Value::from_string(block(macro->body, local));
              }));
    return Value::none();
  }

  Value member(const Node& node, Scope& scope) {
    Value object = eval(*node.a, scope);
    Value property;
    if (node.computed) {
      if (node.b->kind == NodeKind::kSlice) return slice(object, *node.b, scope);
      property = eval(*node.b, scope);
    } else if (node.b->kind == NodeKind::kInteger) {
      property = Value::from_int(node.b->number);
    } else {
      property = Value::from_string(node.b->text);
    }
    if (object.has_attributes()) {
      if (!property.is(Kind::kString)) fail("Cannot access property with non-string: got " + type_name(property));
      if (const Value* found = object.object->find(property.string)) return *found;
      if (!object.is_mapping()) return Value();
      return builtin_member(object, property.string).value_or(Value());
    }
    if (object.is_array() || object.is(Kind::kString)) {
      if (property.is(Kind::kInt)) {
        // Far outside any string or array, and kept inside long long's range.
        const auto index = static_cast<long long>(std::clamp(property.number, -1e15, 1e15));
        if (object.is(Kind::kString)) {
          auto unit = utf16_unit_at(object.string, index);
          return unit ? Value::from_string(*unit) : Value();
        }
        const auto size = static_cast<long long>(object.array->size());
        const long long at = index < 0 ? index + size : index;
        return at >= 0 && at < size ? (*object.array)[static_cast<size_t>(at)] : Value();
      }
      if (!property.is(Kind::kString)) {
        fail("Cannot access property with non-string/non-number: got " + type_name(property));
      }
      return builtin_member(object, property.string).value_or(Value());
    }
    if (!property.is(Kind::kString)) fail("Cannot access property with non-string: got " + type_name(property));
    return builtin_member(object, property.string).value_or(Value());
  }

  Value slice(const Value& object, const Node& slice, Scope& scope) {
    if (!object.is_array() && !object.is(Kind::kString)) fail("Slice object must be an array or string");
    const Value start = slice.a ? eval(*slice.a, scope) : Value();
    const Value stop = slice.b ? eval(*slice.b, scope) : Value();
    const Value step = slice.c ? eval(*slice.c, scope) : Value();
    for (const Value* part : {&start, &stop, &step}) {
      if (!part->is(Kind::kInt) && !part->is(Kind::kUndefined)) fail("Slice indices must be integers or undefined");
    }
    if (object.is_array()) {
      Array out;
      for (size_t i : slice_indices(object.array->size(), start, stop, step)) out.push_back((*object.array)[i]);
      return Value::from_array(std::move(out));
    }
    const std::vector<std::string> chars = code_points(object.string);
    std::string out;
    for (size_t i : slice_indices(chars.size(), start, stop, step)) out += chars[i];
    return Value::from_string(std::move(out));
  }

  Value call(const Node& node, Scope& scope) {
    std::vector<Value> args;
    Object keywords;
    for (const NodePtr& arg : node.items) {
      if (arg->kind != NodeKind::kKeyword) args.push_back(eval(*arg, scope));
    }
    for (const NodePtr& arg : node.items) {
      if (arg->kind != NodeKind::kKeyword) continue;
      if (keywords.find(arg->text)) fail("Got multiple values for keyword argument '" + arg->text + "'");
      keywords.set(arg->text, eval(*arg->a, scope));
    }
    if (keywords.size() > 0) args.push_back(Value::from_object(std::move(keywords), Kind::kKwargs));
    Value callee = eval(*node.a, scope);
    if (!callee.is(Kind::kFunction)) fail("Cannot call something that is not a function: got " + type_name(callee));
    return checked((*callee.function)(args, scope));
  }

  Value unary(const Node& node, Scope& scope) {
    Value v = eval(*node.a, scope);
    if (node.text == "not") return Value::from_bool(!truthy(v));
    const double sign = node.text == "-" ? -1 : 1;
    if (v.is_number())
      return v.is(Kind::kFloat) ? Value::from_float(sign * v.number) : Value::from_int(sign * v.number);
    if (v.is(Kind::kBool)) return Value::from_int(sign * (v.boolean ? 1 : 0));
    fail("Unknown operator \"" + node.text + "\" for " + type_name(v));
  }

  void check_size(const std::string& s) const {
    if (s.size() > options_.max_string_bytes)
      fail("a string grew beyond " + std::to_string(options_.max_string_bytes) + " bytes");
  }

  // A string a filter or call built (replace, indent, join, a macro's output) is bounded too.
  Value checked(Value v) const {
    if (v.is(Kind::kString)) check_size(v.string);
    return v;
  }

  Value concatenate(const Value& left, const Value& right) const {
    std::string joined = to_plain_string(left) + to_plain_string(right);
    check_size(joined);
    return Value::from_string(std::move(joined));
  }

  Value binary(const Node& node, Scope& scope) {
    const std::string& op = node.text;
    Value left = eval(*node.a, scope);
    if (op == "and") return truthy(left) ? eval(*node.b, scope) : left;
    if (op == "or") return truthy(left) ? left : eval(*node.b, scope);
    Value right = eval(*node.b, scope);
    if (op == "==") return Value::from_bool(loose_equals(left, right));
    if (op == "!=") return Value::from_bool(!loose_equals(left, right));
    if (left.is(Kind::kUndefined) || right.is(Kind::kUndefined)) {
      if (right.is(Kind::kUndefined) && (op == "in" || op == "not in")) return Value::from_bool(op == "not in");
      fail("Cannot perform operation " + op + " on undefined values");
    }
    if (left.is(Kind::kNone) || right.is(Kind::kNone)) fail("Cannot perform operation on null values");
    if (op == "~") return concatenate(left, right);
    const auto numeric_like = [](const Value& v) { return v.is_number() || v.is(Kind::kBool); };
    if (op == "**" && numeric_like(left) && numeric_like(right)) {
      const double a = left.is(Kind::kBool) ? left.boolean : left.number;
      const double b = right.is(Kind::kBool) ? right.boolean : right.number;
      if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
      const double result = std::pow(a, b);
      if (!std::isfinite(result)) fail("Exponentiation result is not a finite real number");
      const bool is_float = left.is(Kind::kFloat) || right.is(Kind::kFloat) || b < 0;
      return is_float ? Value::from_float(result) : Value::from_int(result);
    }
    if (left.is_number() && right.is_number()) {
      const double a = left.number;
      const double b = right.number;
      const bool is_float = left.is(Kind::kFloat) || right.is(Kind::kFloat);
      const auto number = [&](double r) { return is_float ? Value::from_float(r) : Value::from_int(r); };
      if (op == "+") return number(a + b);
      if (op == "-") return number(a - b);
      if (op == "*") return number(a * b);
      if (op == "/") return Value::from_float(a / b);
      if (op == "//") return number(std::floor(a / b));
      if (op == "%") return number(std::fmod(a, b));
      if (op == "<") return Value::from_bool(a < b);
      if (op == ">") return Value::from_bool(a > b);
      if (op == ">=") return Value::from_bool(a >= b);
      if (op == "<=") return Value::from_bool(a <= b);
    } else if (left.is_array() && right.is_array()) {
      if (op == "+") {
        if (left.array->size() + right.array->size() > kMaxArrayLength) {
          fail("an array grew longer than " + std::to_string(kMaxArrayLength) + " items");
        }
        Array joined = *left.array;
        joined.insert(joined.end(), right.array->begin(), right.array->end());
        return Value::from_array(std::move(joined));
      }
    } else if (right.is_array() && (op == "in" || op == "not in")) {
      bool member = false;
      for (const Value& item : *right.array) member = member || strict_equals(item, left);
      return Value::from_bool(op == "in" ? member : !member);
    }
    if ((left.is(Kind::kString) || right.is(Kind::kString)) && op == "+") return concatenate(left, right);
    if (left.is(Kind::kString) && right.is(Kind::kString) && (op == "in" || op == "not in")) {
      const bool found = right.string.find(left.string) != std::string::npos;
      return Value::from_bool(op == "in" ? found : !found);
    }
    if (left.is(Kind::kString) && right.is_mapping() && (op == "in" || op == "not in")) {
      const bool found = right.object->find(left.string) != nullptr;
      return Value::from_bool(op == "in" ? found : !found);
    }
    fail("Unknown operator \"" + op + "\" between " + type_name(left) + " and " + type_name(right));
  }

  const RenderOptions& options_;
  int macro_depth_ = 0;
  size_t iterations_ = 0;
};

}  // namespace

std::string render_program(const Node& program, Scope& globals, const RenderOptions& options) {
  Evaluator evaluator(options);
  try {
    return evaluator.block(program.body, globals);
  } catch (const LoopBreak&) {
    throw Error(ErrorCode::kInvalidArgument, "chat template: 'break' outside a loop");
  } catch (const LoopContinue&) {
    throw Error(ErrorCode::kInvalidArgument, "chat template: 'continue' outside a loop");
  }
}

}  // namespace flashq::jinja
