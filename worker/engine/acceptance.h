// Verification of a drafted block against the target's logits (docs/dflash.md §2.4). Row j of the
// target's logits is its distribution for the token after block position j; the draft d_1..d_{B-1}
// sits at block positions 1..B-1.
#pragma once

#include <cstdint>
#include <span>

#include "worker/engine/proposer.h"
#include "worker/engine/sampler.h"

namespace flashq {

struct Acceptance {
  int64_t accepted = 0;  // a: draft tokens kept, 0..B-1
  int32_t bonus = 0;     // the target's own next token after them
};

// Greedy, from the target's choices (choices[j] = argmax of row j, so only ids need reach the
// host): a = longest prefix with d_i == choices[i-1]; bonus = choices[a].
Acceptance accept_longest_prefix(std::span<const int32_t> draft, std::span<const int32_t> choices);

// Exact speculative sampling: accept d_i when u * q_i(d_i) < p_{i-1}(d_i) (probability
// min(1, p / q)); at the first rejection draw from the residual max(0, p_{i-1} - q_i),
// renormalised (p_{i-1} itself if that is all zero), and stop; after a full block draw the bonus
// from p_{B-1}. p_j is the sampler's distribution (temperature, top-k, top-p) of row j; q_i is
// draft_q[i] over its ids, or the point mass on d_i when draft_q is empty (a deterministic
// draft: accept with probability p(d_i), resample without d_i). With an empty draft this is
// exactly one sampler.sample() of row 0.
Acceptance accept_speculative_sampling(std::span<const int32_t> draft, std::span<const float> logits, int64_t vocab,
                                       Sampler& sampler, std::span<const DraftDistribution> draft_q = {});

}  // namespace flashq
