#include "kernels/cuda/matmul_bf16_rows.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace flashq::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kWeightRows = 16;  // per block: two n-tiles of 8
constexpr int kUnroll = 4;       // chunks whose weights are in flight before any is multiplied

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// c += a * b for one m16n8k16 tile (a: 16 x 16 row-major fragment, b: 16 x 8 column fragment).
__device__ inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Eight consecutive elements of x row `row` from column `col`, as four bf16 pairs; zeros for a
// row beyond M. From float32 x (rounded here) or from x already rounded to bf16.
__device__ inline void load_x8(const float* x, int64_t row, int64_t m, int64_t k, int64_t col, uint32_t (&out)[4]) {
  if (row >= m) {
    out[0] = out[1] = out[2] = out[3] = 0u;
    return;
  }
  const float4* p = reinterpret_cast<const float4*>(x + row * k + col);
  const float4 lo = p[0], hi = p[1];
  out[0] = pack_bf16(lo.x, lo.y);
  out[1] = pack_bf16(lo.z, lo.w);
  out[2] = pack_bf16(hi.x, hi.y);
  out[3] = pack_bf16(hi.z, hi.w);
}

__device__ inline void load_x8(const __nv_bfloat16* x, int64_t row, int64_t m, int64_t k, int64_t col,
                               uint32_t (&out)[4]) {
  if (row >= m) {
    out[0] = out[1] = out[2] = out[3] = 0u;
    return;
  }
  const uint4 v = *reinterpret_cast<const uint4*>(x + row * k + col);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}

// RowTiles tiles of 16 x rows. In a chunk of 32 columns, lane (group g = lane / 4, quad q =
// lane % 4) holds columns 8q..8q+7 of weight rows g and g + 8 and of x rows g and g + 8. The
// first k16 step takes columns 8q..8q+3 as the fragment's 2q, 2q+1, 2q+8, 2q+9, the second
// 8q+4..8q+7: a permutation of the chunk's columns, the same for x and w.
template <int RowTiles, typename X>
__global__ void __launch_bounds__(kWarps * 32)
    multiply_rows(const X* __restrict__ x, const __nv_bfloat16* __restrict__ w, float* __restrict__ y, int64_t m,
                  int64_t n, int64_t k) {
  __shared__ float partial[kWarps][32][8];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int group = lane / 4, quad = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kWeightRows;
  const int64_t chunks = k / kBf16RowsChunk;
  const int64_t row_a = n0 + group, row_b = n0 + 8 + group;
  const uint4* wa = reinterpret_cast<const uint4*>(w + row_a * k);
  const uint4* wb = reinterpret_cast<const uint4*>(w + row_b * k);

  float acc[RowTiles][2][4];
#pragma unroll
  for (int t = 0; t < RowTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[t][0][e] = acc[t][1][e] = 0.0f;
  }

  for (int64_t c0 = warp; c0 < chunks; c0 += static_cast<int64_t>(kWarps) * kUnroll) {
    uint4 weights_a[kUnroll], weights_b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + static_cast<int64_t>(u) * kWarps;
      const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
      weights_a[u] = c < chunks && row_a < n ? __ldg(wa + c * 4 + quad) : zero;
      weights_b[u] = c < chunks && row_b < n ? __ldg(wb + c * 4 + quad) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + static_cast<int64_t>(u) * kWarps;
      if (c >= chunks) break;  // the same for the whole warp
      const int64_t col = c * kBf16RowsChunk + quad * 8;
#pragma unroll
      for (int t = 0; t < RowTiles; ++t) {
        uint32_t top[4], bottom[4];
        load_x8(x, t * 16 + group, m, k, col, top);
        load_x8(x, t * 16 + group + 8, m, k, col, bottom);
        const uint32_t first[4] = {top[0], bottom[0], top[1], bottom[1]};
        const uint32_t second[4] = {top[2], bottom[2], top[3], bottom[3]};
        mma_bf16(acc[t][0], first, weights_a[u].x, weights_a[u].y);
        mma_bf16(acc[t][0], second, weights_a[u].z, weights_a[u].w);
        mma_bf16(acc[t][1], first, weights_b[u].x, weights_b[u].y);
        mma_bf16(acc[t][1], second, weights_b[u].z, weights_b[u].w);
      }
    }
  }

  // The warps' sums, added in warp order. Thread i adds element i % 8 of lane i / 8's fragment:
  // n-tile (i % 8) / 4, accumulator (i % 8) % 4 at row group (+ 8 for accumulators 2 and 3) and
  // column 2 * quad (+ 1 for odd accumulators).
  const int from_lane = static_cast<int>(threadIdx.x) / 8, element = static_cast<int>(threadIdx.x) % 8;
  const int64_t out_row = from_lane / 4 + (element % 4 >= 2 ? 8 : 0);
  const int64_t out_col = n0 + (element / 4) * 8 + (from_lane % 4) * 2 + (element % 2);
#pragma unroll
  for (int t = 0; t < RowTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      partial[warp][lane][e] = acc[t][0][e];
      partial[warp][lane][4 + e] = acc[t][1][e];
    }
    __syncthreads();
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += partial[v][from_lane][element];
    const int64_t row = t * 16 + out_row;
    if (row < m && out_col < n) y[row * n + out_col] = sum;
    __syncthreads();
  }
}

__global__ void round_rows_to_bf16(const float* __restrict__ x, __nv_bfloat16* __restrict__ out, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(x[i]);
  }
}

template <typename X>
void launch(const X* x, const __nv_bfloat16* w, float* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((n + kWeightRows - 1) / kWeightRows);
  const int64_t tiles = (m + 15) / 16;
  constexpr unsigned kThreads = kWarps * 32;
  switch (tiles) {
    case 1: multiply_rows<1><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
    case 2: multiply_rows<2><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
    case 3: multiply_rows<3><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
    case 4: multiply_rows<4><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
    case 5: multiply_rows<5><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
    case 6: multiply_rows<6><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
    case 7: multiply_rows<7><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
    default: multiply_rows<8><<<blocks, kThreads, 0, stream>>>(x, w, y, m, n, k); break;
  }
  check_launch("matmul (bf16 rows kernel)");
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool bf16_rows_supported(const void* x, const void* w, int64_t m, int64_t k) {
  return m <= kBf16RowsMaxRows && k % kBf16RowsChunk == 0 && aligned16(x) && aligned16(w);
}

size_t bf16_rows_scratch_bytes(int64_t m, int64_t k) {
  return m <= 16 ? 0 : static_cast<size_t>(m * k) * sizeof(__nv_bfloat16);
}

void matmul_bf16_rows(const float* x, const __nv_bfloat16* w, float* y, int64_t m, int64_t n, int64_t k,
                      void* scratch, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  if (m <= 16) return launch(x, w, y, m, n, k, stream);
  // More row tiles read x once per tile per block: half the bytes from bf16, rounded the same way.
  auto* rounded = static_cast<__nv_bfloat16*>(scratch);
  const int64_t count = m * k;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 4096));
  round_rows_to_bf16<<<blocks, 256, 0, stream>>>(x, rounded, count);
  check_launch("matmul (round x to bf16)");
  launch(static_cast<const __nv_bfloat16*>(rounded), w, y, m, n, k, stream);
}

}  // namespace flashq::cuda
