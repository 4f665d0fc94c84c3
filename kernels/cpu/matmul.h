// y[M, N] = x[M, K] * w[N, K]^T on the CPU, with w in f32, f16 or bf16 and float32 compute
// (twin: kernels/cuda/matmul.cu).
//
// Few rows (decode, verification blocks, draft blocks) are bound by reading the weights: each
// weight row is widened once and used for every x row while it sits in L1. Many rows (prefill)
// are bound by arithmetic: weights are widened panel by panel and multiplied by OpenBLAS sgemm.
// That is the AVX2 path; bf16 weights take an AVX-512 path where the CPU has one
// (kernels/cpu/matmul_path.h, matmul_avx512.h).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cpu {

// Up to this many rows the weight-streaming kernel is used; beyond, sgemm (measured: the tiled
// kernel matches single-threaded sgemm up to 128 rows, and sgemm pays for widening panels).
inline constexpr int64_t kStreamingMaxRows = 128;

void matmul(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n, int64_t k);

// The plain triple loop, in double precision: the twin every fast path is tested against.
void matmul_reference(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n,
                      int64_t k);

}  // namespace flashq::cpu
