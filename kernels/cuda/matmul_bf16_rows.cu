#include "kernels/cuda/matmul_bf16_rows.h"

#include <algorithm>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

constexpr int kWarps = 8;

// Weight tiles of 8 rows a block takes: 2 for up to 32 rows of x; 4 beyond, where each block
// reads all of x (up to 128 rows x K) again, so that x is read half as often per weight row.
__host__ __device__ constexpr int n_tiles_for(int row_tiles) { return row_tiles <= 2 ? 2 : 4; }

// Chunks whose weights are in flight before any is multiplied: fewer when the accumulators
// (row tiles x weight tiles x 4) need the registers.
__host__ __device__ constexpr int unroll_for(int row_tiles, int n_tiles) { return row_tiles * n_tiles <= 16 ? 4 : 2; }

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ inline void prefetch_to_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

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

// The loop both variants share: x's RowTiles tiles of 16 rows against a block's NTiles tiles
// of 8 weight rows; acc[t][j] takes row tile t against weight tile j. rows[j] is this lane's
// weight row in tile j (lane group g = lane / 4 holds row g of every tile), nullptr past the
// weights' end, which reads as zeros.
//
// In a chunk of 32 columns, lane (group g, quad q = lane % 4) holds columns 8q..8q+7 of its
// weight rows and of x rows g and g + 8. The first k16 step takes columns 8q..8q+3 as the
// fragment's 2q, 2q+1, 2q+8, 2q+9, the second 8q+4..8q+7: a permutation of the chunk's
// columns, the same for x and w. Warp w takes chunks w, w + 8, ... in that order, however many
// tiles there are: an output's sum does not depend on RowTiles or NTiles.
template <int RowTiles, int NTiles, typename X>
__device__ inline void multiply_tiles(const X* __restrict__ x, int64_t m, int64_t k,
                                      const __nv_bfloat16* const (&rows)[NTiles], float (&acc)[RowTiles][NTiles][4]) {
  constexpr int kUnroll = unroll_for(RowTiles, NTiles);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int group = lane / 4, quad = lane % 4;
  const int64_t chunks = k / kBf16RowsChunk;
  const uint4* w[NTiles];
#pragma unroll
  for (int j = 0; j < NTiles; ++j) w[j] = reinterpret_cast<const uint4*>(rows[j]);

  // The first round of weight loads is asked of L2 before waiting for the kernel that writes x:
  // with overlapped launches (kernel_launch.h) it streams in while that kernel finishes.
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t c = warp + static_cast<int64_t>(u) * kWarps;
#pragma unroll
    for (int j = 0; j < NTiles; ++j) {
      if (c < chunks && w[j] != nullptr) prefetch_to_l2(w[j] + c * 4 + quad);
    }
  }
  begin_after_previous_grid();

#pragma unroll
  for (int t = 0; t < RowTiles; ++t) {
#pragma unroll
    for (int j = 0; j < NTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[t][j][e] = 0.0f;
    }
  }

  for (int64_t c0 = warp; c0 < chunks; c0 += static_cast<int64_t>(kWarps) * kUnroll) {
    uint4 weights[kUnroll][NTiles];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + static_cast<int64_t>(u) * kWarps;
      const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int j = 0; j < NTiles; ++j) weights[u][j] = c < chunks && w[j] != nullptr ? __ldg(w[j] + c * 4 + quad) : zero;
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
#pragma unroll
        for (int j = 0; j < NTiles; ++j) {
          mma_bf16(acc[t][j], first, weights[u][j].x, weights[u][j].y);
          mma_bf16(acc[t][j], second, weights[u][j].z, weights[u][j].w);
        }
      }
    }
  }
}

// Every warp's fragments of row tile t, for the block to add in warp order: partial[warp][lane]
// holds the lane's four accumulators of weight tile 0, then of tile 1, ... In a fragment,
// accumulator e of lane (group g, quad q) is row g (+ 8 for e >= 2), column 2q + e % 2.
template <int NTiles>
using WarpPartials = float[kWarps][32][4 * NTiles];

template <int RowTiles, int NTiles>
__device__ inline void share_fragments(const float (&acc)[RowTiles][NTiles][4], int t, WarpPartials<NTiles>& partial) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int j = 0; j < NTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][lane][4 * j + e] = acc[t][j][e];
  }
}

template <int NTiles>
__device__ inline float sum_over_warps(const WarpPartials<NTiles>& partial, int lane, int element) {
  float sum = 0.0f;
#pragma unroll
  for (int v = 0; v < kWarps; ++v) sum += partial[v][lane][element];
  return sum;
}

// Decode (one row tile) is held to 3 blocks per SM, the occupancy at which it reads the weights at
// the device's copy bandwidth; more row tiles need the registers.
constexpr int min_blocks_per_sm(int row_tiles) { return row_tiles == 1 ? 3 : 1; }

constexpr unsigned kThreads = kWarps * 32;

// Up to kBf16RowsMaxProducts products, each owning a run of consecutive blocks.
struct ProductTable {
  struct Entry {
    const __nv_bfloat16* w;
    float* y;
    int64_t n;
    int64_t first_block;
  } at[kBf16RowsMaxProducts];
  int count;
};

// A block takes 8 x n_tiles_for(RowTiles) weight rows of one product.
template <int RowTiles, typename X>
__global__ void __launch_bounds__(kWarps * 32, min_blocks_per_sm(RowTiles))
    multiply_rows(const X* __restrict__ x, int64_t m, int64_t k, const __grid_constant__ ProductTable table) {
  constexpr int kTiles = n_tiles_for(RowTiles);
  __shared__ WarpPartials<kTiles> partial;
  int p = 0;
  while (p + 1 < table.count && static_cast<int64_t>(blockIdx.x) >= table.at[p + 1].first_block) ++p;
  const ProductTable::Entry& product = table.at[p];
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) - product.first_block) * 8 * kTiles;
  const int group = static_cast<int>(threadIdx.x) % 32 / 4;
  const __nv_bfloat16* rows[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int64_t row = n0 + 8 * j + group;
    rows[j] = row < product.n ? product.w + row * k : nullptr;
  }
  float acc[RowTiles][kTiles][4];
  multiply_tiles<RowTiles, kTiles>(x, m, k, rows, acc);

  // Job i adds element i % (4 kTiles) of lane i / (4 kTiles)'s fragments: weight tile
  // element / 4, accumulator element % 4.
#pragma unroll
  for (int t = 0; t < RowTiles; ++t) {
    share_fragments<RowTiles, kTiles>(acc, t, partial);
    __syncthreads();
    for (int job = static_cast<int>(threadIdx.x); job < 32 * 4 * kTiles; job += static_cast<int>(kThreads)) {
      const int from_lane = job / (4 * kTiles), element = job % (4 * kTiles), e = element % 4;
      const int64_t row = t * 16 + from_lane / 4 + (e >= 2 ? 8 : 0);
      const int64_t col = n0 + (element / 4) * 8 + (from_lane % 4) * 2 + (e % 2);
      const float sum = sum_over_warps<kTiles>(partial, from_lane, element);
      if (row < m && col < product.n) product.y[row * product.n + col] = sum;
    }
    __syncthreads();
  }
}

// A block takes rows j0..j0+W-1 of gate (its first half of weight tiles) and the same rows of
// up (the second half), W = 4 x n_tiles_for(RowTiles), and writes silu(gate) * up for those W
// columns of out.
template <int RowTiles, typename X>
__global__ void __launch_bounds__(kWarps * 32, min_blocks_per_sm(RowTiles))
    multiply_rows_swiglu(const X* __restrict__ x, int64_t m, int64_t k, const __nv_bfloat16* __restrict__ gate,
                         const __nv_bfloat16* __restrict__ up, float* __restrict__ out, int64_t n) {
  constexpr int kTiles = n_tiles_for(RowTiles), kHalf = kTiles / 2, kColumns = 8 * kHalf;
  __shared__ WarpPartials<kTiles> partial;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kColumns;
  const int group = static_cast<int>(threadIdx.x) % 32 / 4;
  const __nv_bfloat16* rows[kTiles];
#pragma unroll
  for (int h = 0; h < kHalf; ++h) {
    const int64_t row = j0 + 8 * h + group;
    rows[h] = row < n ? gate + row * k : nullptr;
    rows[kHalf + h] = row < n ? up + row * k : nullptr;
  }
  float acc[RowTiles][kTiles][4];
  multiply_tiles<RowTiles, kTiles>(x, m, k, rows, acc);

  // Job i finishes one of the row tile's 16 x kColumns outputs: row r, column c = 8h + cc sits
  // in lane (r % 8) * 4 + cc / 2, accumulator (r >= 8 ? 2 : 0) + cc % 2 of gate tile h and of
  // up tile kHalf + h.
#pragma unroll
  for (int t = 0; t < RowTiles; ++t) {
    share_fragments<RowTiles, kTiles>(acc, t, partial);
    __syncthreads();
    for (int job = static_cast<int>(threadIdx.x); job < 16 * kColumns; job += static_cast<int>(kThreads)) {
      const int r = job / kColumns, c = job % kColumns, h = c / 8, cc = c % 8;
      const int from_lane = (r % 8) * 4 + cc / 2, element = (r >= 8 ? 2 : 0) + cc % 2;
      const float g = sum_over_warps<kTiles>(partial, from_lane, 4 * h + element);
      const float u = sum_over_warps<kTiles>(partial, from_lane, 4 * (kHalf + h) + element);
      const int64_t out_row = t * 16 + r, out_col = j0 + c;
      if (out_row < m && out_col < n) out[out_row * n + out_col] = silu_times(g, u);
    }
    __syncthreads();
  }
}

__global__ void round_rows_to_bf16(const float* __restrict__ x, __nv_bfloat16* __restrict__ out, int64_t count) {
  begin_after_previous_grid();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(x[i]);
  }
}

// Calls launch_tiles.operator()<RowTiles>() with the row tiles M needs (at most 8).
template <typename Launch>
void with_row_tiles(int64_t m, Launch&& launch_tiles) {
  switch ((m + 15) / 16) {
    case 1: return launch_tiles.template operator()<1>();
    case 2: return launch_tiles.template operator()<2>();
    case 3: return launch_tiles.template operator()<3>();
    case 4: return launch_tiles.template operator()<4>();
    case 5: return launch_tiles.template operator()<5>();
    case 6: return launch_tiles.template operator()<6>();
    case 7: return launch_tiles.template operator()<7>();
    default: return launch_tiles.template operator()<8>();
  }
}

template <typename X>
void launch_products(const X* x, std::span<const Bf16RowsProduct> products, int64_t m, int64_t k,
                     cudaStream_t stream) {
  for (size_t first = 0; first < products.size(); first += kBf16RowsMaxProducts) {
    const auto batch = products.subspan(first, std::min<size_t>(kBf16RowsMaxProducts, products.size() - first));
    with_row_tiles(m, [&]<int RowTiles>() {
      constexpr int64_t kWeightRows = 8 * n_tiles_for(RowTiles);
      ProductTable table{};
      int64_t blocks = 0;
      for (const Bf16RowsProduct& product : batch) {
        table.at[table.count++] = {product.w, product.y, product.n, blocks};
        blocks += (product.n + kWeightRows - 1) / kWeightRows;
      }
      if (blocks == 0) return;
      launch_kernel("matmul (bf16 rows kernel)", multiply_rows<RowTiles, X>, static_cast<unsigned>(blocks), kThreads, 0,
                    stream, x, m, k, table);
    });
  }
}

template <typename X>
void launch_swiglu(const X* x, const __nv_bfloat16* gate, const __nv_bfloat16* up, float* out, int64_t m,
                   int64_t n, int64_t k, cudaStream_t stream) {
  with_row_tiles(m, [&]<int RowTiles>() {
    constexpr int64_t kColumns = 4 * n_tiles_for(RowTiles);
    const auto blocks = static_cast<unsigned>((n + kColumns - 1) / kColumns);
    launch_kernel("matmul_swiglu (bf16 rows kernel)", multiply_rows_swiglu<RowTiles, X>, blocks, kThreads, 0, stream, x,
                  m, k, gate, up, out, n);
  });
}

// Up to 16 rows, x is rounded as it is loaded; more row tiles would read it once per tile per
// block, so it is rounded to bf16 once (half the bytes, the same rounding) into `scratch`.
template <typename Launch>
void with_x_for_rows(const float* x, int64_t m, int64_t k, void* scratch, cudaStream_t stream, Launch&& launch_with) {
  if (m <= 16) return launch_with(x);
  auto* rounded = static_cast<__nv_bfloat16*>(scratch);
  const int64_t count = m * k;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 4096));
  launch_kernel("matmul (round x to bf16)", round_rows_to_bf16, blocks, 256, 0, stream, x, rounded, count);
  launch_with(static_cast<const __nv_bfloat16*>(rounded));
}

}  // namespace

bool bf16_rows_supported(const void* x, const void* w, int64_t m, int64_t k) {
  return m <= kBf16RowsMaxRows && k % kBf16RowsChunk == 0 && aligned16(x) && aligned16(w);
}

size_t bf16_rows_scratch_bytes(int64_t m, int64_t k) {
  return m <= 16 ? 0 : static_cast<size_t>(m * k) * sizeof(__nv_bfloat16);
}

void matmul_bf16_rows_many(const float* x, std::span<const Bf16RowsProduct> products, int64_t m, int64_t k,
                           void* scratch, cudaStream_t stream) {
  if (m == 0 || products.empty()) return;
  with_x_for_rows(x, m, k, scratch, stream, [&](const auto* rows) { launch_products(rows, products, m, k, stream); });
}

void matmul_bf16_rows(const float* x, const __nv_bfloat16* w, float* y, int64_t m, int64_t n, int64_t k,
                      void* scratch, cudaStream_t stream) {
  const Bf16RowsProduct product{w, y, n};
  matmul_bf16_rows_many(x, std::span(&product, 1), m, k, scratch, stream);
}

void matmul_bf16_rows_swiglu(const float* x, const __nv_bfloat16* gate, const __nv_bfloat16* up, float* out,
                             int64_t m, int64_t n, int64_t k, void* scratch, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  with_x_for_rows(x, m, k, scratch, stream,
                  [&](const auto* rows) { launch_swiglu(rows, gate, up, out, m, n, k, stream); });
}

}  // namespace flashq::cuda
