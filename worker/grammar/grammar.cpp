#include "worker/grammar/grammar.h"

#include <cstdio>

#include "shared/error.h"
#include "worker/grammar/grammar_checks.h"
#include "worker/grammar/rule_inlining.h"

namespace flashq::grammar {
namespace {

std::string byte_set_to_gbnf(const ByteSet& set) {
  std::string out = "[";
  for (int lo = 0; lo < 256;) {
    if (!set.contains(static_cast<uint8_t>(lo))) {
      ++lo;
      continue;
    }
    int hi = lo;
    while (hi + 1 < 256 && set.contains(static_cast<uint8_t>(hi + 1))) ++hi;
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\x%02X", lo);
    out += buf;
    if (hi > lo) {
      std::snprintf(buf, sizeof buf, "-\\x%02X", hi);
      out += buf;
    }
    lo = hi + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::to_gbnf() const {
  std::string out;
  for (const Rule& rule : rules_) {
    out += rule.name + " ::=";
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      int32_t pos = rule.alternatives[a];
      if (elements_[pos].kind == ElementKind::kEnd) out += " \"\"";
      for (; elements_[pos].kind != ElementKind::kEnd; ++pos) {
        const Element& e = elements_[pos];
        out += ' ';
        out += e.kind == ElementKind::kBytes ? byte_set_to_gbnf(byte_sets_[e.index])
                                             : rules_[e.index].name;
      }
    }
    out += '\n';
  }
  return out;
}

int32_t GrammarBuilder::rule_id(std::string_view name) {
  if (auto it = ids_.find(std::string(name)); it != ids_.end()) return it->second;
  if (grammar_.rules_.size() >= static_cast<size_t>(kMaxRules)) {
    throw Error(ErrorCode::kInvalidArgument,
                "grammar has more than " + std::to_string(kMaxRules) + " rules");
  }
  grammar_.rules_.push_back(Rule{std::string(name), {}});
  defined_.push_back(false);
  pending_.emplace_back();
  int32_t id = static_cast<int32_t>(grammar_.rules_.size() - 1);
  ids_.emplace(std::string(name), id);
  return id;
}

int32_t GrammarBuilder::add_helper_rule(std::string_view base) {
  std::string name = std::string(base) + "." + std::to_string(grammar_.rules_.size());
  int32_t id = rule_id(name);
  define(id);
  return id;
}

void GrammarBuilder::define(int32_t rule) { defined_[rule] = true; }

void GrammarBuilder::add_alternative(int32_t rule, const std::vector<Element>& sequence) {
  define(rule);
  pending_[rule].push_back(sequence);
}

Element GrammarBuilder::bytes_element(const ByteSet& set) {
  for (size_t i = 0; i < grammar_.byte_sets_.size(); ++i) {
    if (grammar_.byte_sets_[i] == set) return {ElementKind::kBytes, static_cast<int32_t>(i)};
  }
  grammar_.byte_sets_.push_back(set);
  return {ElementKind::kBytes, static_cast<int32_t>(grammar_.byte_sets_.size() - 1)};
}

Grammar GrammarBuilder::finish(std::string_view root_name) {
  for (size_t r = 0; r < defined_.size(); ++r) {
    if (!defined_[r]) {
      throw Error(ErrorCode::kInvalidArgument,
                  "grammar rule '" + grammar_.rules_[r].name + "' is used but never defined");
    }
  }
  int32_t root = -1;
  for (size_t r = 0; r < grammar_.rules_.size(); ++r) {
    if (grammar_.rules_[r].name == root_name) root = static_cast<int32_t>(r);
  }
  if (root < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "grammar has no rule '" + std::string(root_name) + "' to start from");
  }
  check_no_left_recursion(grammar_.rules_, pending_);
  inline_single_alternative_rules(pending_);
  size_t total = 0;
  for (const auto& alternatives : pending_) {
    for (const auto& sequence : alternatives) total += sequence.size() + 1;
  }
  if (total > static_cast<size_t>(kMaxElements)) {
    throw Error(ErrorCode::kInvalidArgument, "grammar has more than " +
                                                 std::to_string(kMaxElements) + " elements");
  }
  grammar_.elements_.reserve(total);
  for (size_t r = 0; r < pending_.size(); ++r) {
    for (const auto& sequence : pending_[r]) {
      grammar_.rules_[r].alternatives.push_back(static_cast<int32_t>(grammar_.elements_.size()));
      grammar_.elements_.insert(grammar_.elements_.end(), sequence.begin(), sequence.end());
      grammar_.elements_.push_back(Element{});
    }
  }
  grammar_.root_ = root;
  return std::move(grammar_);
}

}  // namespace flashq::grammar
