// y[M, N] = x[M, K] * W^T for MXFP4 weights on the AVX-512 paths (kernels/cpu/matmul_path.h):
// a block's 16 code bytes widened to 16 lanes, and each lane's two codes looked up in the block's
// 16 E2M1 values times its scale (vpermps, which reads only an index's low 4 bits: the low nibble
// as it is, the high one after a shift). So a block gives its even elements in one vector and its
// odd ones in another, and x is taken in the same order (each run of 32 split into its even and
// odd elements once per call). The kernels carry function-level target attributes, so this file
// builds for the x86-64-v3 baseline and its code runs only where matmul_path() chose AVX-512.
//
// Every output element is one 16-lane accumulator over the blocks in order (even part, then odd),
// then one horizontal sum, whatever M and whichever tile it falls in.
#pragma once

#include <cstdint>

namespace flashq::cpu {

// Any number of rows: decoding a block costs about what two rows' multiply-adds do, so from a
// few rows on this kernel is bound by arithmetic, and at every M measured it beat decoding
// panels for sgemm (docs/perf.md); every row's result is the same bits at any M.
void matmul_mxfp4_avx512(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                         int64_t k);

}  // namespace flashq::cpu
