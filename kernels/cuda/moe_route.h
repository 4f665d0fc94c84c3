// A mixture-of-experts router's choice on the GPU (twin: kernels/cpu/moe_route.cpp), with the
// same order (by logit, ties to the lower index, NaN below every number) and softmaxes in double.
// Simple: a thread per row, the j-th pick found by a scan for the heaviest expert lighter than the
// (j-1)-th: O(top_k * experts) per row, nothing stored.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/moe.h"

namespace flashq::cuda {

void moe_route(const float* logits, int64_t rows, int64_t experts, const MoeRouting& routing, int32_t* ids,
               float* weights, cudaStream_t stream);

}  // namespace flashq::cuda
