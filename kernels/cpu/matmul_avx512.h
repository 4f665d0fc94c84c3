// y[M, N] = x[M, K] * w[N, K]^T for bf16 weights on the AVX-512 paths (kernels/cpu/matmul_path.h):
// vdpbf16ps on bf16 activations (split into two terms, or rounded once) or float32 FMAs on 16
// lanes. The kernels carry function-level target attributes, so this file builds for the
// x86-64-v3 baseline and its code runs only where matmul_path() chose it.
//
// Every output element is one 16-lane accumulator over k in order, then the same horizontal
// sum, whatever M and whichever tile it falls in: a row's result does not depend on the rows
// beside it, at any M (decode, verification, drafting and prefill agree bit for bit).
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul_path.h"

namespace flashq::cpu {

// `path` is one of the AVX-512 paths and supported by this CPU.
void matmul_bf16_avx512(const float* x, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                        MatmulPath path);

}  // namespace flashq::cpu
