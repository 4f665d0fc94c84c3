// Which running sequence gives its blocks back when one cannot grow (the paged KV cache is out of
// free and evictable blocks): the one admitted last. It has done the least work, so recomputing
// it costs least, and the sequences admitted before it, first come first served, keep their
// place. The preempted sequence registers its full blocks before releasing them, so when it is
// admitted again its prompt and output so far are mostly a prefix hit, unless pressure evicted
// them meanwhile; it goes back to the front of the waiting queue and is recomputed from what it
// has emitted (as a continuation is), never finished early.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace flashq {

struct PreemptionCandidate {
  uint64_t id;              // the engine's sequence id
  uint64_t admission_order; // increases with each admission
  int64_t blocks;           // blocks its table holds (what preempting it could free)
};

// The index of the sequence to preempt among `running` (every running sequence, the one that
// cannot grow included), or nothing when none holds a block. When the choice is the sequence
// that cannot grow and no other holds a block, it has the whole pool: preempting it would free
// nothing it could use, and it finishes (`length`) instead.
inline std::optional<size_t> choose_preemption_victim(std::span<const PreemptionCandidate> running) {
  std::optional<size_t> victim;
  for (size_t i = 0; i < running.size(); ++i) {
    if (running[i].blocks == 0) continue;
    if (!victim || running[i].admission_order > running[*victim].admission_order) victim = i;
  }
  return victim;
}

}  // namespace flashq
