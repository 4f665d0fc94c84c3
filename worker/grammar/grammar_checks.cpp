#include "worker/grammar/grammar_checks.h"

#include "shared/error.h"

namespace flashq::grammar {

std::vector<bool> nullable_rules(const RuleAlternatives& alternatives) {
  std::vector<bool> nullable(alternatives.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < alternatives.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& sequence : alternatives[r]) {
        bool all = true;
        for (const Element& e : sequence) {
          all = all && e.kind == ElementKind::kRule && nullable[e.index];
        }
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

void check_no_left_recursion(const std::vector<Rule>& rules, const RuleAlternatives& alternatives) {
  std::vector<bool> nullable = nullable_rules(alternatives);
  // leftmost[r]: rules r may start with before consuming any byte.
  std::vector<std::vector<int32_t>> leftmost(alternatives.size());
  for (size_t r = 0; r < alternatives.size(); ++r) {
    for (const auto& sequence : alternatives[r]) {
      for (const Element& e : sequence) {
        if (e.kind != ElementKind::kRule) break;
        leftmost[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  // Iterative depth-first search for a cycle: 0 unseen, 1 on the path, 2 done.
  std::vector<uint8_t> state(alternatives.size(), 0);
  for (size_t start = 0; start < alternatives.size(); ++start) {
    if (state[start] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> path{{static_cast<int32_t>(start), 0}};
    state[start] = 1;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == leftmost[rule].size()) {
        state[rule] = 2;
        path.pop_back();
        continue;
      }
      int32_t child = leftmost[rule][next++];
      if (state[child] == 1) {
        throw Error(ErrorCode::kInvalidArgument,
                    "grammar rule '" + rules[child].name +
                        "' is left-recursive (it can reach itself before matching any byte)");
      }
      if (state[child] == 0) {
        state[child] = 1;
        path.emplace_back(child, 0);
      }
    }
  }
}

}  // namespace flashq::grammar
