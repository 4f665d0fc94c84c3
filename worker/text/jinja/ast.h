// The syntax tree of a parsed template. One node type; which fields a kind uses is listed beside
// the kind. Statements render to text; expressions compute a Value.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace flashq::jinja {

struct Node;
using NodePtr = std::unique_ptr<Node>;

enum class NodeKind {
  // statements
  kProgram,  // body
  kText,     // text
  kComment,  //
  kIf,       // a: test; body; orelse (an elif is a nested kIf there)
  kFor,      // a: target (kIdentifier or kTuple); b: iterable; c: filter test of `for x in xs if t`; body; orelse
  kSet,      // a: target (kIdentifier, kTuple, or kMember on a namespace); b: value, or body for a block set
  kMacro,    // text: name; params (kIdentifier, or kKeyword with a default in a); body
  kBreak,
  kContinue,
  // expressions (an expression in {{ }} is a statement that prints its value)
  kInteger,     // number
  kFloat,       // number
  kString,      // text
  kIdentifier,  // text
  kArray,       // items
  kTuple,       // items
  kObject,      // items: keys; values
  kMember,      // a: object; b: property (kIdentifier or kInteger when !computed); computed
  kSlice,       // a, b, c: start, stop, step (any may be null); only as a kMember's property
  kCall,        // a: callee; items: positional args and kKeyword args
  kKeyword,     // text: name; a: value
  kUnary,       // text: "not" "-" "+"; a
  kBinary,      // text: operator; a, b
  kFilter,      // a: operand; text: filter name; called: written with (); items: args
  kTest,        // a: operand; text: test name; negated
  kSelect,      // a: value; b: condition (`a if b` without else)
  kTernary,     // a: condition; b: value if true; c: value if false
};

struct Node {
  NodeKind kind;
  int line = 0;
  std::string text;
  double number = 0;
  bool computed = false;
  bool called = false;
  bool negated = false;
  NodePtr a, b, c;
  std::vector<NodePtr> items;   // array/tuple items, object keys, call and filter arguments
  std::vector<NodePtr> values;  // object values
  std::vector<NodePtr> params;  // macro parameters
  std::vector<NodePtr> body;
  std::vector<NodePtr> orelse;

  Node(NodeKind k, int l) : kind(k), line(l) {}
};

}  // namespace flashq::jinja
