// y[M, N] = x[M, K] * w[N, K]^T for bf16 weights and few rows (decode, verification and draft
// blocks, M <= 128), on the tensor cores: x rounded to bf16, float32 accumulation.
//
// Such a product is bound by reading the weights once. A block takes 16 weight rows (two
// 8-column tiles of mma.m16n8k16) and its 8 warps split K in chunks of 32; each lane loads
// 16 bytes of a weight row per chunk, so the chunk's elements go to the tensor core in a
// permuted order (the same for x), which a dot product does not see. x goes by in tiles of
// 16 rows while the weights stay in registers. The warps' sums are added in a fixed order, so a
// row's result never depends on M or on the other rows: decoding a row alone and verifying it
// in a block give the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace flashq::cuda {

inline constexpr int64_t kBf16RowsMaxRows = 128;
inline constexpr int64_t kBf16RowsChunk = 32;  // K must be a multiple of this

// True when the kernel takes this shape: K a multiple of 32, x and w 16-byte aligned, M <= 128.
bool bf16_rows_supported(const void* x, const void* w, int64_t m, int64_t k);

// Bytes of scratch (x rounded to bf16) the kernel needs: none for up to 16 rows, which round x
// as they load it.
size_t bf16_rows_scratch_bytes(int64_t m, int64_t k);

void matmul_bf16_rows(const float* x, const __nv_bfloat16* w, float* y, int64_t m, int64_t n, int64_t k,
                      void* scratch, cudaStream_t stream);

}  // namespace flashq::cuda
