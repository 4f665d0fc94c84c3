// The speculation lines of `flashq-bench kernels --deltanet-only`: what a verification block
// costs a hybrid model's recurrent state, per Gated DeltaNet layer at Qwen3.5-9B's shape (16 key
// and 32 value heads of 128, conv kernel 4), for blocks of B = 4, 8 and 16 rows with half of
// them accepted. Two designs side by side (docs/decisions.md, "Recurrent state under
// speculation"): the state kept before the block and the kept rows' recurrence re-run
// (RecurrentState, what flashq does: snapshot, restore, replay), against a state kept after every
// row of the block and the accepted one copied back (B state writes and a copy). Each line gives
// both designs' time and memory.
#pragma once

#include "kernels/backend.h"
#include "tools/flashq_bench/moe_bench.h"

namespace flashq {

void report_speculation_state(Backend& backend, const TimePerCall& time);

}  // namespace flashq
