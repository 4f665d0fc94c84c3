// y[M, N] = x[M, K] * W^T on the CPU for W in MXFP4 (kernels/linear_weight.h: FP4 E2M1 blocks of
// 32 with an E8M0 scale), float32 compute (twin: kernels/cuda/matmul_mxfp4.cu).
//
// Each block of 32 weights is decoded in registers (a 16-entry table lookup of the doubled E2M1
// values, widened, times half the block's scale: exact in float32) and multiplied in float32 as
// the dense kernels do. Few rows (decode, verification blocks, an expert's share of a pass) stream
// the weights once, using each decoded block for every row; many rows decode panels of weight
// rows into float32 (about 1 MiB at a time, never the whole matrix) for OpenBLAS sgemm, as the
// dense matmul does (kernels/cpu/matmul.h).
//
// Where matmul_path() chose an AVX-512 path, every M takes the AVX-512 kernel
// (kernels/cpu/matmul_mxfp4_avx512.h: a 16-entry lookup per 16 lanes, faster than sgemm on decoded
// panels at every M measured). Elsewhere few rows take this file's AVX2 kernel (the x86-64-v3
// baseline: the doubled E2M1 values as int8 by vpshufb, widened) and many rows sgemm.
//
// On the AVX2 kernel every output element is one 8-lane accumulator over K in order, then a
// horizontal sum, whatever M (up to kStreamingMaxRows) and whichever tile it falls in: a row's
// result does not depend on the rows beside it.
#pragma once

#include <cstdint>

namespace flashq::cpu {

// blocks [n, k / 2] and scales [n, k / 32]; k a multiple of 32.
void matmul_mxfp4(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                  int64_t k);

}  // namespace flashq::cpu
