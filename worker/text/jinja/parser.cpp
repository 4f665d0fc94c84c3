#include "worker/text/jinja/parser.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "shared/error.h"
#include "worker/text/jinja/subset.h"

namespace flashq::jinja {
namespace {

bool one_of(const std::string& name, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

// Deeper nesting than any real template, refused so that recursion cannot exhaust the stack.
constexpr int kMaxNesting = 100;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  NodePtr program() {
    auto root = std::make_unique<Node>(NodeKind::kProgram, 1);
    while (pos_ < tokens_.size()) root->body.push_back(any());
    return root;
  }

 private:
  [[noreturn]] void syntax_error(int line, const std::string& message) const {
    throw Error(ErrorCode::kInvalidArgument, "chat template line " + std::to_string(line) + ": " + message);
  }
  [[noreturn]] void unsupported(int line, const std::string& what) const {
    throw Error(ErrorCode::kUnsupported,
                "chat template line " + std::to_string(line) + ": " + what + " is not supported");
  }

  int line() const { return pos_ < tokens_.size() ? tokens_[pos_].line : (tokens_.empty() ? 1 : tokens_.back().line); }
  bool is(TokenType type, size_t ahead = 0) const {
    return pos_ + ahead < tokens_.size() && tokens_[pos_ + ahead].type == type;
  }
  bool is_word(const char* name, size_t ahead = 0) const {
    return is(TokenType::kIdentifier, ahead) && tokens_[pos_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    return is(TokenType::kOpenStatement) && is(TokenType::kIdentifier, 1) && one_of(tokens_[pos_ + 1].value, names);
  }
  const Token& expect(TokenType type, const char* what) {
    if (!is(type)) syntax_error(line(), std::string("expected ") + what);
    return tokens_[pos_++];
  }
  void expect_word(const char* name) {
    if (!is_word(name)) syntax_error(line(), std::string("expected '") + name + "'");
    ++pos_;
  }
  void expect_end_tag(const char* name) {
    expect(TokenType::kOpenStatement, "'{%'");
    expect_word(name);
    expect(TokenType::kCloseStatement, "'%}'");
  }
  // Statements up to one of `ends` (not consumed); running out is an error naming the opener.
  std::vector<NodePtr> block_until(std::initializer_list<const char*> ends, const char* opener, int opener_line) {
    std::vector<NodePtr> body;
    while (!is_statement(ends)) {
      if (pos_ >= tokens_.size()) syntax_error(opener_line, std::string("'") + opener + "' is never closed");
      body.push_back(any());
    }
    return body;
  }

  NodePtr any() {
    const Token& t = tokens_[pos_];
    switch (t.type) {
      case TokenType::kComment:
        ++pos_;
        return std::make_unique<Node>(NodeKind::kComment, t.line);
      case TokenType::kText: {
        auto node = std::make_unique<Node>(NodeKind::kText, t.line);
        node->text = t.value;
        ++pos_;
        return node;
      }
      case TokenType::kOpenStatement:
        return statement();
      case TokenType::kOpenExpression: {
        ++pos_;
        NodePtr e = expression();
        expect(TokenType::kCloseExpression, "'}}'");
        return e;
      }
      default:
        syntax_error(t.line, "unexpected '" + t.value + "'");
    }
  }

  // Counts one level of recursion for as long as it lives.
  struct Depth {
    explicit Depth(const Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting)
        parser.unsupported(parser.line(), "nesting deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Depth() { --parser.depth_; }
    const Parser& parser;
  };

  NodePtr statement() {
    const Depth depth(*this);
    const int start = line();
    ++pos_;  // {%
    if (!is(TokenType::kIdentifier)) syntax_error(start, "expected a statement name after '{%'");
    const std::string name = tokens_[pos_].value;
    if (is_unsupported_statement(name)) unsupported(start, "statement '" + name + "'");
    ++pos_;
    if (name == "set") return set_statement(start);
    if (name == "if") {
      NodePtr node = if_statement(start);
      expect_end_tag("endif");
      return node;
    }
    if (name == "for") {
      NodePtr node = for_statement(start);
      expect_end_tag("endfor");
      return node;
    }
    if (name == "macro") {
      NodePtr node = macro_statement(start);
      expect_end_tag("endmacro");
      return node;
    }
    if (name == "break" || name == "continue") {
      expect(TokenType::kCloseStatement, "'%}'");
      return std::make_unique<Node>(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, start);
    }
    syntax_error(start, "unexpected statement '" + name + "'");
  }

  NodePtr set_statement(int start) {
    auto node = std::make_unique<Node>(NodeKind::kSet, start);
    node->a = expression_sequence(false);
    if (node->a->kind != NodeKind::kIdentifier && node->a->kind != NodeKind::kTuple &&
        !(node->a->kind == NodeKind::kMember && !node->a->computed)) {
      syntax_error(start, "cannot assign to this expression");
    }
    if (is(TokenType::kEquals)) {
      ++pos_;
      node->b = expression_sequence(false);
    } else {
      expect(TokenType::kCloseStatement, "'%}'");
      node->body = block_until({"endset"}, "set", start);
      ++pos_;
      expect_word("endset");
    }
    expect(TokenType::kCloseStatement, "'%}'");
    return node;
  }

  NodePtr if_statement(int start) {
    auto node = std::make_unique<Node>(NodeKind::kIf, start);
    node->a = expression();
    expect(TokenType::kCloseStatement, "'%}'");
    node->body = block_until({"elif", "else", "endif"}, "if", start);
    if (is_statement({"elif"})) {
      const int elif_line = line();
      pos_ += 2;
      node->orelse.push_back(if_statement(elif_line));
    } else if (is_statement({"else"})) {
      pos_ += 2;
      expect(TokenType::kCloseStatement, "'%}'");
      node->orelse = block_until({"endif"}, "if", start);
    }
    return node;
  }

  NodePtr for_statement(int start) {
    auto node = std::make_unique<Node>(NodeKind::kFor, start);
    node->a = expression_sequence(true);
    if (node->a->kind == NodeKind::kTuple) {
      for (const NodePtr& item : node->a->items) {
        if (item->kind != NodeKind::kIdentifier) syntax_error(start, "loop variables must be names");
      }
    } else if (node->a->kind != NodeKind::kIdentifier) {
      syntax_error(start, "expected a loop variable name");
    }
    expect_word("in");
    NodePtr iterable = expression();
    if (iterable->kind == NodeKind::kSelect) {
      node->b = std::move(iterable->a);
      node->c = std::move(iterable->b);
    } else {
      node->b = std::move(iterable);
    }
    expect(TokenType::kCloseStatement, "'%}'");
    node->body = block_until({"endfor", "else"}, "for", start);
    if (is_statement({"else"})) {
      pos_ += 2;
      expect(TokenType::kCloseStatement, "'%}'");
      node->orelse = block_until({"endfor"}, "for", start);
    }
    return node;
  }

  NodePtr macro_statement(int start) {
    auto node = std::make_unique<Node>(NodeKind::kMacro, start);
    if (!is(TokenType::kIdentifier)) syntax_error(start, "expected a macro name");
    node->text = tokens_[pos_++].value;
    node->params = arguments(true);
    expect(TokenType::kCloseStatement, "'%}'");
    node->body = block_until({"endmacro"}, "macro", start);
    for (const NodePtr& param : node->params) {
      const std::string& name = param->text;
      if (name == "kwargs" || name == "varargs") unsupported(start, "macro parameter '" + name + "'");
    }
    for (const NodePtr& statement : node->body) refuse_special_macro_names(*statement);
    return node;
  }

  // A macro reading `kwargs` or `varargs` takes extra arguments, which the engine does not do.
  void refuse_special_macro_names(const Node& node) const {
    if (node.kind == NodeKind::kIdentifier && (node.text == "kwargs" || node.text == "varargs")) {
      unsupported(node.line, "'" + node.text + "' in a macro");
    }
    for (const NodePtr* child : {&node.a, &node.b, &node.c}) {
      if (*child) refuse_special_macro_names(**child);
    }
    for (const auto* list : {&node.items, &node.values, &node.body, &node.orelse}) {
      for (const NodePtr& child : *list) refuse_special_macro_names(*child);
    }
  }

  NodePtr expression_sequence(bool primary) {
    const int start = line();
    NodePtr first = primary ? primary_expression() : expression();
    if (!is(TokenType::kComma)) return first;
    auto tuple = std::make_unique<Node>(NodeKind::kTuple, start);
    tuple->items.push_back(std::move(first));
    while (is(TokenType::kComma)) {
      ++pos_;
      tuple->items.push_back(primary ? primary_expression() : expression());
    }
    return tuple;
  }

  NodePtr expression() {
    const Depth depth(*this);
    return if_expression();
  }

  NodePtr if_expression() {
    const int start = line();
    NodePtr value = or_expression();
    if (!is_word("if")) return value;
    ++pos_;
    NodePtr test = or_expression();
    if (is_word("else")) {
      ++pos_;
      auto node = std::make_unique<Node>(NodeKind::kTernary, start);
      node->a = std::move(test);
      node->b = std::move(value);
      node->c = if_expression();
      return node;
    }
    auto node = std::make_unique<Node>(NodeKind::kSelect, start);
    node->a = std::move(value);
    node->b = std::move(test);
    return node;
  }

  NodePtr binary(std::string op, NodePtr left, NodePtr right, int at) {
    auto node = std::make_unique<Node>(NodeKind::kBinary, at);
    node->text = std::move(op);
    node->a = std::move(left);
    node->b = std::move(right);
    return node;
  }

  NodePtr or_expression() {
    NodePtr left = and_expression();
    while (is_word("or")) {
      const int at = line();
      ++pos_;
      left = binary("or", std::move(left), and_expression(), at);
    }
    return left;
  }

  NodePtr and_expression() {
    NodePtr left = not_expression();
    while (is_word("and")) {
      const int at = line();
      ++pos_;
      left = binary("and", std::move(left), not_expression(), at);
    }
    return left;
  }

  NodePtr not_expression() {
    if (!is_word("not")) return comparison_expression();
    const Depth depth(*this);
    auto node = std::make_unique<Node>(NodeKind::kUnary, line());
    node->text = "not";
    ++pos_;
    node->a = not_expression();
    return node;
  }

  NodePtr comparison_expression() {
    NodePtr left = additive_expression();
    while (true) {
      const int at = line();
      std::string op;
      if (is_word("not") && is_word("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else if (is_word("in") || is(TokenType::kComparison)) {
        op = tokens_[pos_++].value;
      } else {
        return left;
      }
      left = binary(op, std::move(left), additive_expression(), at);
    }
  }

  NodePtr additive_expression() {
    NodePtr left = multiplicative_expression();
    while (is(TokenType::kAdditive)) {
      const int at = line();
      std::string op = tokens_[pos_++].value;
      left = binary(op, std::move(left), multiplicative_expression(), at);
    }
    return left;
  }

  NodePtr multiplicative_expression() {
    NodePtr left = power_expression();
    while (is(TokenType::kMultiplicative)) {
      const int at = line();
      std::string op = tokens_[pos_++].value;
      left = binary(op, std::move(left), power_expression(), at);
    }
    return left;
  }

  NodePtr power_expression() {
    NodePtr left = test_expression();
    while (is(TokenType::kPower)) {
      const int at = line();
      ++pos_;
      left = binary("**", std::move(left), test_expression(), at);
    }
    return left;
  }

  NodePtr test_expression() {
    NodePtr operand = filter_expression();
    while (is_word("is")) {
      auto node = std::make_unique<Node>(NodeKind::kTest, line());
      ++pos_;
      if (is_word("not")) {
        node->negated = true;
        ++pos_;
      }
      if (!is(TokenType::kIdentifier)) syntax_error(node->line, "expected a test name after 'is'");
      node->text = tokens_[pos_++].value;
      if (!is_supported_test(node->text)) unsupported(node->line, "test '" + node->text + "'");
      if (is(TokenType::kOpenParen) || is(TokenType::kNumber) || is(TokenType::kString)) {
        unsupported(node->line, "test '" + node->text + "' with an argument");
      }
      node->a = std::move(operand);
      operand = std::move(node);
    }
    return operand;
  }

  NodePtr filter_expression() {
    NodePtr operand = unary_sign_expression();
    while (is(TokenType::kPipe)) {
      auto node = std::make_unique<Node>(NodeKind::kFilter, line());
      ++pos_;
      if (!is(TokenType::kIdentifier)) syntax_error(node->line, "expected a filter name after '|'");
      node->text = tokens_[pos_++].value;
      node->called = is(TokenType::kOpenParen);
      if (node->called) node->items = arguments(false);
      check_filter(*node);
      node->a = std::move(operand);
      operand = std::move(node);
    }
    return operand;
  }

  void check_filter(const Node& filter) const {
    const std::string& name = filter.text;
    if (!is_plain_filter(name) && !is_called_filter(name)) unsupported(filter.line, "filter '" + name + "'");
    if (filter.called && !is_called_filter(name)) unsupported(filter.line, "filter '" + name + "' with arguments");
    if (!filter.called && !is_plain_filter(name)) unsupported(filter.line, "filter '" + name + "' without arguments");
    // The test a select-style filter applies, when written as a literal, must be one the engine has.
    const size_t test_arg = name == "selectattr" || name == "rejectattr" ? 1 : 0;
    if ((name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") &&
        filter.items.size() > test_arg && filter.items[test_arg]->kind == NodeKind::kString &&
        !is_supported_test(filter.items[test_arg]->text) && !is_comparison_test(filter.items[test_arg]->text)) {
      unsupported(filter.line, "test '" + filter.items[test_arg]->text + "'");
    }
    if (name == "map") {
      const bool has_attribute = std::any_of(filter.items.begin(), filter.items.end(), [](const NodePtr& arg) {
        return arg->kind == NodeKind::kKeyword && arg->text == "attribute";
      });
      // map('upper'): a filter applied to each item, which the reference engine lacks (Gemma 4's
      // template reaches it for a tool parameter with several types); a known filter, no arguments.
      const bool maps_filter = filter.items.size() == 1 && filter.items[0]->kind == NodeKind::kString &&
                               is_plain_filter(filter.items[0]->text);
      if (!has_attribute && !maps_filter) unsupported(filter.line, "filter 'map' without attribute=");
    }
  }

  NodePtr unary_sign_expression() {
    if ((is(TokenType::kUnary) || is(TokenType::kAdditive)) &&
        (tokens_[pos_].value == "-" || tokens_[pos_].value == "+")) {
      const Depth depth(*this);
      auto node = std::make_unique<Node>(NodeKind::kUnary, line());
      node->text = tokens_[pos_++].value;
      node->a = unary_sign_expression();
      return node;
    }
    return call_member_expression();
  }

  NodePtr call_member_expression() {
    NodePtr member = member_expression(primary_expression());
    while (is(TokenType::kOpenParen)) member = member_expression(call(std::move(member)));
    return member;
  }

  NodePtr call(NodePtr callee) {
    auto node = std::make_unique<Node>(NodeKind::kCall, line());
    if (callee->kind == NodeKind::kMember && !callee->computed && !is_supported_method(callee->b->text)) {
      unsupported(node->line, "method '" + callee->b->text + "'");
    }
    if (callee->kind == NodeKind::kIdentifier && is_unsupported_global(callee->text)) {
      unsupported(node->line, "function '" + callee->text + "'");
    }
    node->items = arguments(false);
    node->a = std::move(callee);
    return node;
  }

  // ( args ): positional expressions, then name=value keywords (in a macro definition, parameters
  // with defaults).
  std::vector<NodePtr> arguments(bool parameters) {
    const int start = line();
    expect(TokenType::kOpenParen, "'('");
    std::vector<NodePtr> args;
    bool saw_keyword = false;
    while (!is(TokenType::kCloseParen)) {
      if (pos_ >= tokens_.size()) syntax_error(start, "unclosed '('");
      if (is(TokenType::kPower) || (is(TokenType::kMultiplicative) && tokens_[pos_].value == "*")) {
        unsupported(line(), "argument unpacking with * or **");
      }
      NodePtr arg = expression();
      if (is(TokenType::kEquals)) {
        ++pos_;
        if (arg->kind != NodeKind::kIdentifier) syntax_error(arg->line, "expected a name before '='");
        auto keyword = std::make_unique<Node>(NodeKind::kKeyword, arg->line);
        keyword->text = arg->text;
        keyword->a = expression();
        arg = std::move(keyword);
        saw_keyword = true;
      } else if (saw_keyword) {
        syntax_error(arg->line, parameters ? "non-default argument follows default argument"
                                           : "positional argument follows keyword argument");
      }
      if (parameters) {
        if (arg->kind == NodeKind::kIdentifier) {
          auto keyword = std::make_unique<Node>(NodeKind::kKeyword, arg->line);
          keyword->text = arg->text;
          arg = std::move(keyword);  // a parameter without default: a null a
        } else if (arg->kind != NodeKind::kKeyword) {
          syntax_error(arg->line, "expected a parameter name");
        }
        for (const NodePtr& other : args) {
          if (other->text == arg->text) syntax_error(arg->line, "duplicate parameter '" + arg->text + "'");
        }
      }
      args.push_back(std::move(arg));
      if (is(TokenType::kComma)) ++pos_;
    }
    ++pos_;
    return args;
  }

  NodePtr member_expression(NodePtr object) {
    while (is(TokenType::kDot) || is(TokenType::kOpenBracket)) {
      auto node = std::make_unique<Node>(NodeKind::kMember, line());
      node->computed = is(TokenType::kOpenBracket);
      ++pos_;
      if (node->computed) {
        node->b = subscript();
        expect(TokenType::kCloseBracket, "']'");
      } else {
        node->b = primary_expression();
        if (node->b->kind != NodeKind::kIdentifier && node->b->kind != NodeKind::kInteger) {
          syntax_error(node->line, "expected a name after '.'");
        }
      }
      node->a = std::move(object);
      object = std::move(node);
    }
    return object;
  }

  // The inside of [ ]: one expression, or a slice start:stop:step with any part left out.
  NodePtr subscript() {
    const int start = line();
    std::vector<NodePtr> parts;
    bool slice = false;
    while (!is(TokenType::kCloseBracket)) {
      if (pos_ >= tokens_.size()) syntax_error(start, "unclosed '['");
      if (is(TokenType::kColon)) {
        parts.push_back(nullptr);
        ++pos_;
        slice = true;
      } else {
        parts.push_back(expression());
        if (is(TokenType::kColon)) {
          ++pos_;
          slice = true;
        }
      }
    }
    if (parts.empty()) syntax_error(start, "expected an index or slice inside '[]'");
    if (!slice) return std::move(parts[0]);
    if (parts.size() > 3) syntax_error(start, "a slice has at most three parts");
    auto node = std::make_unique<Node>(NodeKind::kSlice, start);
    node->a = std::move(parts[0]);
    if (parts.size() > 1) node->b = std::move(parts[1]);
    if (parts.size() > 2) node->c = std::move(parts[2]);
    return node;
  }

  NodePtr primary_expression() {
    if (pos_ >= tokens_.size()) syntax_error(line(), "unexpected end of template");
    const Token& t = tokens_[pos_++];
    switch (t.type) {
      case TokenType::kNumber: {
        const bool is_float = t.value.find('.') != std::string::npos;
        auto node = std::make_unique<Node>(is_float ? NodeKind::kFloat : NodeKind::kInteger, t.line);
        node->number = std::strtod(t.value.c_str(), nullptr);  // JavaScript's Number(): overflow is Infinity
        return node;
      }
      case TokenType::kString: {
        auto node = std::make_unique<Node>(NodeKind::kString, t.line);
        node->text = t.value;
        while (is(TokenType::kString)) node->text += tokens_[pos_++].value;
        return node;
      }
      case TokenType::kIdentifier: {
        auto node = std::make_unique<Node>(NodeKind::kIdentifier, t.line);
        node->text = t.value;
        return node;
      }
      case TokenType::kOpenParen: {
        NodePtr inner = expression_sequence(false);
        expect(TokenType::kCloseParen, "')'");
        return inner;
      }
      case TokenType::kOpenBracket: {
        auto node = std::make_unique<Node>(NodeKind::kArray, t.line);
        while (!is(TokenType::kCloseBracket)) {
          if (pos_ >= tokens_.size()) syntax_error(t.line, "unclosed '['");
          node->items.push_back(expression());
          if (is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return node;
      }
      case TokenType::kOpenBrace: {
        auto node = std::make_unique<Node>(NodeKind::kObject, t.line);
        while (!is(TokenType::kCloseBrace)) {
          if (pos_ >= tokens_.size()) syntax_error(t.line, "unclosed '{'");
          node->items.push_back(expression());
          expect(TokenType::kColon, "':' between key and value");
          node->values.push_back(expression());
          if (is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return node;
      }
      default:
        syntax_error(t.line, "unexpected '" + t.value + "'");
    }
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  mutable int depth_ = 0;
};

}  // namespace

NodePtr parse_program(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace flashq::jinja
