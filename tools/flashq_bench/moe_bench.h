// The mixture-of-experts lines of `flashq-bench kernels` on the CPU, at real shapes: the MXFP4
// product at gpt-oss-20b's expert shapes, and a whole layer's experts (Backend::moe_experts) at
// gpt-oss-20b's (MXFP4) and Qwen3-30B-A3B's (bf16), for 1, 4 and 16 rows. Each reports GB/s of
// the weights it really reads and the fraction of the measured read bandwidth that is.
#pragma once

#include <functional>

namespace flashq {

// Seconds per call of `body`, as the kernel benchmark times its CPU cases.
using TimePerCall = std::function<double(const std::function<void()>& body)>;

// `read_gb_per_s`: the machine's measured read bandwidth, the floor each line is held against.
void report_cpu_moe(const TimePerCall& time, double read_gb_per_s);

}  // namespace flashq
