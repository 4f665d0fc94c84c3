// Embedding lookup on the CPU (twin: kernels/cuda/embedding.cu).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cpu {

// out[m] = table[ids[m]] widened to float32. The caller has checked every id against `vocab`.
void embedding(const void* table, DType dtype, const int32_t* ids, float* out, int64_t rows, int64_t dim);

}  // namespace flashq::cpu
