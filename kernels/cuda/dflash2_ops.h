// DFlash2's drafter ops on the GPU (twin: kernels/cpu/dflash2_ops.cpp), as Backend states them
// (kernels/backend.h). Simple and obviously right rather than fast: a thread per output of the
// convolution and of the pair scores, and a block per row of the top-k, which takes the k
// largest one after another, each the largest below the one before in (value, lower index)
// order. The draft pass they serve has B - 1 rows a sequence.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

void grouped_dynamic_conv(const float* x, const float* dynamic, const void* base, DType base_dtype,
                          const int32_t* row_in_block, int64_t rows, int64_t channels, int64_t taps, int64_t group_size,
                          float* out, cudaStream_t stream);

void top_k(const float* logits, int64_t rows, int64_t vocab, int64_t k, float* values, int32_t* ids,
           cudaStream_t stream);

void selector_pair_scores(const float* a, const float* h, const float* b, int64_t rows, int64_t k, int64_t rank,
                          float* out, cudaStream_t stream);

}  // namespace flashq::cuda
