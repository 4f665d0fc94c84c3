// DFlash2's drafter ops on the CPU (twin: kernels/cuda/dflash2_ops.cu), as Backend states them
// (kernels/backend.h): the grouped dynamic causal convolution, the top-k of each row of logits
// and the candidate selector's pair scores. Plain loops: each output sums its terms in the
// stated order, so a row's bits depend only on its own inputs.
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_view.h"

namespace flashq::cpu {

// x, out [rows, channels]; dynamic [rows, taps * channels / group_size]; base [taps, channels].
void grouped_dynamic_conv(const float* x, const float* dynamic, WeightVector base, const int32_t* row_in_block,
                          int64_t rows, int64_t channels, int64_t taps, int64_t group_size, float* out);

// The k largest of each row of logits [rows, vocab], descending, ties to the lower index.
void top_k(const float* logits, int64_t rows, int64_t vocab, int64_t k, float* values, int32_t* ids);

// out[i, p, q] = sum_r a[i k + p, r] h[i, r] b[i k + q, r].
void selector_pair_scores(const float* a, const float* h, const float* b, int64_t rows, int64_t k, int64_t rank,
                          float* out);

}  // namespace flashq::cpu
