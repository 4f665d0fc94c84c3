// A context-free grammar over bytes, in the flat form the matcher walks. Every rule is a list of
// alternatives; every alternative is a run of elements in one shared array, closed by an kEnd
// element, so a grammar position is one index into that array. Repetition, groups and character
// classes are already lowered to plain rules by the parser (gbnf_parser.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "worker/grammar/byte_set.h"

namespace flashq::grammar {

enum class ElementKind : uint8_t {
  kBytes,  // one byte from byte_sets()[index]
  kRule,   // the rule rules()[index]
  kEnd,    // the end of an alternative
};

struct Element {
  ElementKind kind = ElementKind::kEnd;
  int32_t index = -1;
};

struct Rule {
  std::string name;
  std::vector<int32_t> alternatives;  // positions in elements() where each alternative starts
};

// Limits that keep compilation and matching bounded whatever the input (docs/grammar.md).
inline constexpr int32_t kMaxRules = 50'000;
inline constexpr int32_t kMaxElements = 1'000'000;

class Grammar {
 public:
  const std::vector<Rule>& rules() const { return rules_; }
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  int32_t root() const { return root_; }

  // The grammar written back as GBNF (one line per rule, byte sets as classes of \xHH ranges):
  // for error messages, debugging and handing the same language to another engine.
  std::string to_gbnf() const;

 private:
  friend class GrammarBuilder;
  std::vector<Rule> rules_;
  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  int32_t root_ = -1;
};

// Builds a Grammar rule by rule; finish() checks it (every referenced rule defined, no left
// recursion, the limits above) and throws kInvalidArgument naming the rule at fault.
class GrammarBuilder {
 public:
  // The id of the rule called `name`, declaring it when new (a reference before its definition).
  int32_t rule_id(std::string_view name);
  // A fresh rule for a lowered group or repetition, named `base.N` (a name GBNF cannot write,
  // so it never meets a rule of the text).
  int32_t add_helper_rule(std::string_view base);
  void add_alternative(int32_t rule, const std::vector<Element>& sequence);
  // Marks `rule` as defined even if it gets no alternative yet.
  void define(int32_t rule);
  bool is_defined(int32_t rule) const { return defined_[rule]; }
  const std::string& name(int32_t rule) const { return grammar_.rules_[rule].name; }
  Element bytes_element(const ByteSet& set);
  static Element rule_element(int32_t rule) { return {ElementKind::kRule, rule}; }

  Grammar finish(std::string_view root_name);

 private:
  Grammar grammar_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<bool> defined_;
  std::vector<std::vector<std::vector<Element>>> pending_;  // per rule, its alternatives
};

}  // namespace flashq::grammar
