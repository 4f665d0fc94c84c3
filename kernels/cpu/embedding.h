// Embedding gather and argmax on the CPU.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cpu {

// out[m] = table[ids[m]] widened to float32. The caller has checked every id against `vocab`.
void embedding(const void* table, DType dtype, const int32_t* ids, float* out, int64_t rows, int64_t dim);

// ids[m] = the index of the largest logit of row m, the lowest on ties; NaN reads as -inf
// (cpu/sampling.h).
void argmax(const float* logits, int32_t* ids, int64_t rows, int64_t vocab);

}  // namespace flashq::cpu
