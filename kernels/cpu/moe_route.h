// A mixture-of-experts router's choice on the CPU (twin: kernels/cuda/moe_route.cu): for each
// row of logits [rows, experts], the top_k experts, heaviest first, and their weights, as
// Backend::moe_route states (kernels/backend.h). Experts are ranked by logit, ties to the lower
// index, a NaN logit below every number; softmaxes are formed in double.
#pragma once

#include <cstdint>

#include "kernels/moe.h"

namespace flashq::cpu {

// ids and weights [rows, routing.top_k]; routing already checked (kernels/op_checks.h).
void moe_route(const float* logits, int64_t rows, int64_t experts, const MoeRouting& routing, int32_t* ids,
               float* weights);

}  // namespace flashq::cpu
