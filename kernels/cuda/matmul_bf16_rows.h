// y[M, N] = x[M, K] * w[N, K]^T for bf16 weights and few rows (decode, verification and draft
// blocks, M <= 128), on the tensor cores: x rounded to bf16, float32 accumulation.
//
// Such a product is bound by reading the weights once. A block takes 16 weight rows (two
// 8-column tiles of mma.m16n8k16; 32 rows, four tiles, beyond 32 rows of x, which every block
// reads whole) and its 8 warps split K in chunks of 32; each lane loads 16 bytes of a weight
// row per chunk, so the chunk's elements go to the tensor core in a permuted order (the same
// for x), which a dot product does not see. x goes by in tiles of 16 rows while the weights
// stay in registers. Warp w always takes chunks w, w + 8, ... and the warps' sums are added in
// a fixed order, so a row's result never depends on M, on the tiles or on the other rows:
// decoding a row alone and verifying it in a block give the same bits.
//
// Two variants share that loop. Several products of one x (q, k and v) go in one launch, the
// blocks split among them. The MLP's gate and up products go in one launch with SwiGLU applied
// before anything is stored: a block's two tiles are 8 rows of gate and the same 8 rows of up,
// each summed exactly as alone, so the result has the bits of matmul, matmul, swiglu.
//
// No CPU twin: on the CPU, matmul_many and matmul_swiglu are Backend's defaults (matmul one
// product at a time), which is what these are held to.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

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

// One product of matmul_bf16_rows_many: y[M, n] = x * w[n, K]^T.
struct Bf16RowsProduct {
  const __nv_bfloat16* w = nullptr;
  float* y = nullptr;
  int64_t n = 0;
};

// Products launched together (their blocks in one grid); more than this many take more launches.
inline constexpr int kBf16RowsMaxProducts = 16;

// Every product of the same x, each with the result matmul_bf16_rows gives it alone.
void matmul_bf16_rows_many(const float* x, std::span<const Bf16RowsProduct> products, int64_t m, int64_t k,
                           void* scratch, cudaStream_t stream);

// out[M, n] = silu(x * gate^T) * (x * up^T), gate and up [n, K], in one launch (two beyond 16
// rows, which round x first).
void matmul_bf16_rows_swiglu(const float* x, const __nv_bfloat16* gate, const __nv_bfloat16* up, float* out,
                             int64_t m, int64_t n, int64_t k, void* scratch, cudaStream_t stream);

}  // namespace flashq::cuda
