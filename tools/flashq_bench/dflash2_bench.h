// The DFlash2 lines of `flashq-bench kernels` at the published drafter's settings on Qwen3-0.6B's
// shape (hidden 1024, vocabulary 151936; two taps over groups of 16, top-16 candidates, rank
// 256), for one block of 16 (15 draft rows) and eight blocks: Backend::grouped_dynamic_conv
// (bf16 taps), top_k over the rows' logits and selector_pair_scores, per call, with the bytes
// each reads.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "tools/flashq_bench/moe_bench.h"

namespace flashq {

// Lines named `prefix` + the op ("" on the CPU, "cuda_" on a GPU).
void report_dflash2_ops(Backend& backend, const std::string& prefix, const TimePerCall& time);

}  // namespace flashq
