// y[M, N] = x[M, K] * w[N, K]^T on the GPU: x and y float32, w in f32, bf16 or f16 (row-major
// [out, in], as in the checkpoint), float32 accumulation.
//
// Few rows (decode, verification and draft blocks) are bound by reading the weights: a warp per
// weight row streams it once with 16-byte loads and multiplies every x row against it (the row
// stays in L1 while tiles of 8 x rows go by). Each output element is summed in the same order
// whatever M is, so a row's result does not depend on which rows share the call. Many rows
// (prefill) go to cuBLAS: bf16 weights with x rounded to bf16 in a scratch buffer, f32 weights
// with f32 compute (no TF32). f16 weights always take the streaming kernel (x rounded to f16
// could overflow).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

// Up to this many rows the streaming kernel is used; beyond, cuBLAS. 128 as on the CPU
// (kernels/cpu/matmul.h, docs/decisions.md "Batch invariance"): verification passes of up to 8
// sequences of block 16 give each row the same bits as decoding it alone. flashq-bench kernels
// times both sides of the switch (M = 128 against M = 129) on a given GPU.
inline constexpr int64_t kStreamingMaxRows = 128;

// Bytes of scratch matmul() needs for these shapes (0 when it needs none).
size_t matmul_scratch_bytes(DType w_dtype, int64_t m, int64_t k);

// Launches on `stream` (cuBLAS must already be bound to it); `scratch` holds at least
// matmul_scratch_bytes(w_dtype, m, k) bytes. Allocates nothing.
void matmul(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n, int64_t k,
            cublasHandle_t cublas, void* scratch, cudaStream_t stream);

// The streaming kernel alone, for any M: matmul() takes it up to kStreamingMaxRows rows and
// always for f16 weights.
void matmul_streaming(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n, int64_t k,
                      cudaStream_t stream);

}  // namespace flashq::cuda
