#include "kernels/cpu/matmul_mxfp4_avx512.h"

// GCC 12's AVX-512 intrinsics fill unused lanes from a deliberately uninitialised register
// (_mm512_undefined_*), which -Wmaybe-uninitialized and -Wuninitialized report where they are
// inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace flashq::cpu {
namespace {

#define FLASHQ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define FLASHQ_INLINE __attribute__((always_inline)) inline

constexpr int64_t kBlock = 32;
constexpr int64_t kBlockBytes = 16;
// Rows of x taken together while weight tiles go by: 64 rows of K = 2880 are 720 KiB.
constexpr int64_t kRowBlock = 64;

// The 16 E2M1 values, codes 0-15.
constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

struct Operands {
  const float* x;  // split: each run of 32 as its 16 even elements, then its 16 odd ones
  const uint8_t* blocks;
  const uint8_t* scales;
  const float* scale_values;  // 2^(s - 127) for each s
  float* y;
  int64_t n, k;
};

// R rows of split x against C consecutive weight rows (from j): R * C accumulators.
template <int R, int C>
FLASHQ_INLINE FLASHQ_AVX512 void multiply_tile(const Operands& o, int64_t i0, int64_t j) {
  const __m512 table = _mm512_loadu_ps(kE2m1);
  const int64_t row_bytes = o.k / 2, row_scales = o.k / kBlock;
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < row_scales; ++b) {
    // One weight row's block at a time, used by every row of x (more decoded blocks held at once
    // spill registers at 4 x 4).
    for (int c = 0; c < C; ++c) {
      const int64_t row = j + c;
      const __m512 values = _mm512_mul_ps(table, _mm512_set1_ps(o.scale_values[o.scales[row * row_scales + b]]));
      const __m512i codes = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(o.blocks + row * row_bytes + b * kBlockBytes)));
      const __m512 even = _mm512_permutexvar_ps(codes, values);
      const __m512 odd = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), values);
      for (int r = 0; r < R; ++r) {
        const float* xr = o.x + (i0 + r) * o.k + b * kBlock;
        acc[r][c] = _mm512_fmadd_ps(even, _mm512_loadu_ps(xr), acc[r][c]);
        acc[r][c] = _mm512_fmadd_ps(odd, _mm512_loadu_ps(xr + 16), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) o.y[(i0 + r) * o.n + j + c] = _mm512_reduce_add_ps(acc[r][c]);
  }
}

// Weight rows [j, j + C) against rows [i0, i0 + rows) of x, in groups of up to 4.
template <int C>
FLASHQ_AVX512 void multiply_weight_rows(const Operands& o, int64_t i0, int64_t rows, int64_t j) {
  const int64_t end = i0 + rows;
  int64_t i = i0;
  for (; i + 4 <= end; i += 4) multiply_tile<4, C>(o, i, j);
  switch (end - i) {
    case 3:
      multiply_tile<3, C>(o, i, j);
      break;
    case 2:
      multiply_tile<2, C>(o, i, j);
      break;
    case 1:
      multiply_tile<1, C>(o, i, j);
      break;
    default:
      break;
  }
}

// Each run of 32 of x as its even elements, then its odd ones: the order a block decodes in.
FLASHQ_AVX512 void split_even_odd(const float* x, float* split, int64_t k) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t p = 0; p < k; p += kBlock) {
    const __m512 lo = _mm512_loadu_ps(x + p), hi = _mm512_loadu_ps(x + p + 16);
    _mm512_storeu_ps(split + p, _mm512_permutex2var_ps(lo, even, hi));
    _mm512_storeu_ps(split + p + 16, _mm512_permutex2var_ps(lo, odd, hi));
  }
}

const float* scale_values() {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int s = 0; s < 256; ++s) t[static_cast<size_t>(s)] = std::ldexp(1.0f, s - 127);
    return t;
  }();
  return table.data();
}

std::vector<float>& split_buffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

}  // namespace

void matmul_mxfp4_avx512(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                         int64_t k) {
  std::vector<float>& split = split_buffer();
  if (split.size() < static_cast<size_t>(m * k)) split.resize(static_cast<size_t>(m * k));
  float* split_x = split.data();
  const Operands o{split_x, blocks, scales, scale_values(), y, n, k};
  // One row (decode) takes 8 weight rows a tile, so 8 independent sums hide the FMA latency;
  // more rows take 4 (4 x 4 accumulators).
  const int64_t tile = m == 1 ? 8 : 4;
  const int64_t tiles = n / tile;
  // Below about a million multiply-adds, waking a second thread costs more than it saves.
  // On the calling thread: a small share of the work (0.5 ms of 50 at 512 x 2880 x 2880), and a
  // barrier fewer, which a neighbour holding a core makes cost a time slice.
  for (int64_t i = 0; i < m; ++i) split_even_odd(x + i * k, split_x + i * k, k);
#pragma omp parallel if (m * n * k >= (int64_t{1} << 20))
  {
    // Rows in blocks that stay in L2 while a thread's weight tiles go by; a static schedule gives
    // a thread the same tiles in every block, and blocks write apart, so none waits for another.
    for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, m - i0);
#pragma omp for schedule(static) nowait
      for (int64_t t = 0; t < tiles; ++t) {
        if (m == 1) {
          multiply_weight_rows<8>(o, i0, rows, t * tile);
        } else {
          multiply_weight_rows<4>(o, i0, rows, t * tile);
        }
      }
    }
  }
  for (int64_t j = tiles * tile; j < n; ++j) multiply_weight_rows<1>(o, 0, m, j);
}

}  // namespace flashq::cpu
