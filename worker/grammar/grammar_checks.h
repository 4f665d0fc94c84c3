// Checks on a grammar before it is flattened: a left-recursive rule would make the matcher expand
// forever, so it is refused up front, naming the rule.
#pragma once

#include <vector>

#include "worker/grammar/grammar.h"

namespace flashq::grammar {

using RuleAlternatives = std::vector<std::vector<std::vector<Element>>>;

// Throws kInvalidArgument naming a rule that can reach itself without consuming a byte.
void check_no_left_recursion(const std::vector<Rule>& rules, const RuleAlternatives& alternatives);

// Per rule, whether it can match the empty string.
std::vector<bool> nullable_rules(const RuleAlternatives& alternatives);

}  // namespace flashq::grammar
