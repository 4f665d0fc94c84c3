// A mixture-of-experts layer's experts on the CPU (twin: kernels/cuda/moe_experts.cu), as
// Backend::moe_experts states (kernels/backend.h).
//
// The ids are on the host, so rows are grouped by expert here: every (row, slot) routed to an
// expert is gathered into one contiguous block, and each expert's products run once over its
// block through the fast matmul paths (kernels/cpu/matmul.h, matmul_mxfp4.h), which read its
// weights once for all of them; an expert without rows is skipped. With as many chosen experts
// as threads, the threads take whole experts; with fewer, each product is spread over them. The down products land in
// slot order's own buffer, and each row's output is their weighted sum in slot order, so a row's
// result does not depend on which rows share the call (below the matmul's streaming limit).
//
// Scratch: a buffer of the calling thread, grown to the largest call and reused, of
// rows * top_k * (2 * hidden + 3 * intermediate) floats (gathered rows, gate and up, the
// activation, the down products).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/moe.h"

namespace flashq::cpu {

struct MoeShape {
  int64_t rows = 0, top_k = 0, hidden = 0, intermediate = 0;
};

// y[rows, out] = x * W^T (+ bias) for a dense or MXFP4 weight on the host.
void linear(const float* x, int64_t rows, const LinearWeight& w, float* y);

// ids [rows, top_k] all in [0, experts.size()) (the caller checks them); weights likewise.
void moe_experts(const float* x, const int32_t* ids, const float* weights, const MoeShape& shape,
                 std::span<const ExpertWeights> experts, const ExpertActivation& activation, float* out);

}  // namespace flashq::cpu
