// The mixture-of-experts lines of `flashq-bench kernels`, at real shapes: the MXFP4
// product at gpt-oss-20b's expert shapes, and a whole layer's experts (Backend::moe_experts) at
// gpt-oss-20b's (MXFP4) and Qwen3-30B-A3B's (bf16), for 1, 4 and 16 rows. Each reports GB/s of
// the weights it really reads and the fraction of the measured read bandwidth that is.
#pragma once

#include <functional>

#include "kernels/backend.h"

namespace flashq {

// Seconds per call of `body`, as the kernel benchmark times its cases on that backend (a GPU's
// synchronised after its launches).
using TimePerCall = std::function<double(const std::function<void()>& body)>;

// On `backend` (the CPU, or a GPU with the "cuda_" prefix on its lines); `floor_gb_per_s`: the
// measured read bandwidth (a GPU's copy bandwidth), the floor each line is held against. The CPU
// lines also give each case's fastest call.
void report_moe(Backend& backend, const TimePerCall& time, double floor_gb_per_s);

}  // namespace flashq
