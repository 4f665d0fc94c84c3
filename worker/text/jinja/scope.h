// Variable scopes of a render: the globals (built-in functions, true/false/none, the context's
// variables), then one scope per for loop and macro call. `set` writes the innermost scope; a
// lookup walks outwards and yields undefined when no scope has the name.
#pragma once

#include <string>
#include <unordered_map>

#include "worker/text/jinja/value.h"

namespace flashq::jinja {

class Scope {
 public:
  explicit Scope(Scope* parent = nullptr) : parent_(parent) {}

  Value lookup(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_) {
      auto it = s->variables_.find(name);
      if (it != s->variables_.end()) return it->second;
    }
    return Value();
  }
  bool declared_here(const std::string& name) const { return variables_.count(name) != 0; }
  void set(const std::string& name, Value value) { variables_[name] = std::move(value); }

 private:
  Scope* parent_;
  std::unordered_map<std::string, Value> variables_;
};

}  // namespace flashq::jinja
