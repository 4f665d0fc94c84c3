// y[M, N] = x[M, K] * W^T on the GPU for W in MXFP4 (kernels/linear_weight.h), float32
// accumulation (twin: kernels/cpu/matmul_mxfp4.cpp). Simple: a warp per weight row, each lane
// decoding its elements one by one (kernels/cuda/mxfp4.cuh) against tiles of 8 rows of x; the row
// is read from memory once and from cache for the further tiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashq::cuda {

// blocks [n, k / 2], scales [n, k / 32], k a multiple of 32. Allocates nothing.
void matmul_mxfp4(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                  int64_t k, cudaStream_t stream);

}  // namespace flashq::cuda
