// RMSNorm over rows of length `dim`: y = x * rsqrt(mean(x^2) + eps) * w (twin:
// kernels/cuda/rmsnorm.cu).
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_view.h"

namespace flashq::cpu {

void rmsnorm(const float* x, WeightVector w, float eps, float* y, int64_t rows, int64_t dim);

// h += delta; y = rmsnorm(h) * w.
void add_rmsnorm(float* h, const float* delta, WeightVector w, float eps, float* y, int64_t rows,
                 int64_t dim);

}  // namespace flashq::cpu
