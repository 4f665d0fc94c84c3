// The Gated DeltaNet lines of `flashq-bench kernels`, at Qwen3.5-9B's linear-attention shape (16
// key heads and 32 value heads of 128: 8,192 conv channels, kernel 4), for a decode row of 1 and
// of 16 sequences and prompts of 256 and 1,024 rows, each from a state of its own:
// Backend::causal_conv1d (bf16 weights), the element-wise delta_rule_gates, gated_rmsnorm and
// sigmoid_gate, and Backend::gated_delta_rule, reported per call with the state's bytes (read
// and written once a row at the least) and the recurrence's flops (about 8 a state element a
// row: the decay, S^T k, the update and S^T q); for the prompts, also the chunked form
// (`KERNEL_chunked`) against the recurrent one.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "tools/flashq_bench/moe_bench.h"

namespace flashq {

// Lines named `kernel` ("gated_delta_rule", "cuda_gated_delta_rule"); `floor_gb_per_s`: the
// device's read (or copy) bandwidth, for the fraction of it the state traffic reaches.
void report_gated_delta_rule(Backend& backend, const std::string& kernel, const TimePerCall& time,
                             double floor_gb_per_s);

}  // namespace flashq
