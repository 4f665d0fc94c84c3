// Splices rules that have a single alternative into the sequences that use them. The token mask
// cache (token_mask_cache.h) decides most tokens from the rule on top of the stack alone and only
// re-checks tokens that run past that rule's end; longer rules mean fewer such tokens (a string's
// closing quote followed by a comma stays inside the object's rule instead of ending a rule).
#pragma once

#include "worker/grammar/grammar_checks.h"

namespace flashq::grammar {

void inline_single_alternative_rules(RuleAlternatives& alternatives);

}  // namespace flashq::grammar
