// RMSNorm and the residual add fused with it, on the GPU (twin: kernels/cpu/rmsnorm.cpp).
// One block per row; statistics in float32. x and y may be the same memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

// y = x * rsqrt(mean(x^2) + eps) * w, row by row.
void rmsnorm(const float* x, const void* w, DType w_dtype, float eps, float* y, int64_t rows, int64_t dim,
             cudaStream_t stream);

// h += delta, then y = rmsnorm(h) * w.
void add_rmsnorm(float* h, const float* delta, const void* w, DType w_dtype, float eps, float* y, int64_t rows,
                 int64_t dim, cudaStream_t stream);

}  // namespace flashq::cuda
