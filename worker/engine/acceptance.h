// Verification of a drafted block against the target's logits (docs/dflash.md §2.4). Row j of the
// target's logits is its distribution for the token after block position j; the draft d_1..d_{B-1}
// sits at block positions 1..B-1.
#pragma once

#include <cstdint>
#include <span>

#include "worker/engine/sampler.h"

namespace flashq {

struct Acceptance {
  int64_t accepted = 0;  // a: draft tokens kept, 0..B-1
  int32_t bonus = 0;     // the target's own next token after them
};

// Greedy, from the target's choices (choices[j] = argmax of row j, so only ids need reach the
// host): a = longest prefix with d_i == choices[i-1]; bonus = choices[a].
Acceptance accept_longest_prefix(std::span<const int32_t> draft, std::span<const int32_t> choices);

// Exact speculative sampling for a deterministic draft: accept d_i with probability p_{i-1}(d_i);
// at the first rejection draw from p_{i-1} without d_i, renormalised; after a full block draw
// the bonus from p_{B-1}. p_j is the sampler's distribution (temperature, top-k, top-p) of row j.
// With an empty draft this is exactly one sampler.sample() of row 0.
Acceptance accept_speculative_sampling(std::span<const int32_t> draft, std::span<const float> logits, int64_t vocab,
                                       Sampler& sampler);

}  // namespace flashq
