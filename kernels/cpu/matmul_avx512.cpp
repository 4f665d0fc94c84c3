#include "kernels/cpu/matmul_avx512.h"

// GCC 12's AVX-512 intrinsics fill unused lanes from a deliberately uninitialised register
// (_mm512_undefined_*), which -Wmaybe-uninitialized reports where they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <vector>

namespace flashq::cpu {
namespace {

#define FLASHQ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define FLASHQ_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define FLASHQ_INLINE __attribute__((always_inline)) inline

// Rows of x taken together while a panel of weight rows sits in L1: 64 rows of bf16 terms of
// K = 3072 (the widest Qwen3-0.6B product) are 384 KiB with two terms, within a core's L2.
constexpr int64_t kRowBlock = 64;

// What a panel call needs. x: float32 rows (`x_row` floats apart) on the float32 path; bf16
// terms on the dot-product paths, row i's term t at x + (i * terms + t) * padded_k, zero from k
// to padded_k (a multiple of 32), so only the weights' last chunk needs a mask.
struct Operands {
  const void* x;
  int64_t x_row, padded_k;
  const uint16_t* w;
  float* y;
  int64_t n, k;
};

FLASHQ_INLINE FLASHQ_AVX512 __mmask16 mask16(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}
FLASHQ_INLINE FLASHQ_AVX512 __mmask32 mask32(int64_t left) {
  return left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1);
}

// ---- vdpbf16ps: 32 bf16 products per instruction, summed in pairs into 16 float32 lanes ----

// Row `i` of x as `terms` bf16 vectors: hi = x rounded to bf16; with two terms also
// lo = (x - hi) rounded, exact in float32 since hi holds x's leading 8 bits, so
// |x - hi - lo| <= 2^-9 |x - hi| <= 2^-18 |x|.
FLASHQ_AVX512_BF16 void to_bf16_terms(const float* x, int64_t k, int terms, int64_t padded_k, uint16_t* out) {
  for (int64_t p = 0; p < padded_k; p += 16) {
    const __m512 v = p < k ? _mm512_maskz_loadu_ps(mask16(k - p), x + p) : _mm512_setzero_ps();
    const __m256i hi = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + p), hi);
    if (terms == 2) {
      const __m512 hi_f32 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
      const __m256i lo = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_sub_ps(v, hi_f32)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + padded_k + p), lo);
    }
  }
}

// One chunk of 32 k: C weight vectors, then for each row its terms against all of them.
template <int R, int C, int Terms>
FLASHQ_INLINE FLASHQ_AVX512_BF16 void dot_chunk(__m512 (&acc)[R][C], const uint16_t* x, int64_t padded_k,
                                                const uint16_t* w, int64_t k, int64_t p, __mmask32 mask) {
  __m512bh wv[C];
  for (int c = 0; c < C; ++c) wv[c] = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, w + c * k + p));
  // All rows' hi terms, then all rows' lo terms: an accumulator's two products of a chunk are
  // R * C instructions apart, not C, so its chain does not hold up the issue.
  for (int t = 0; t < Terms; ++t) {
    for (int r = 0; r < R; ++r) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + (r * Terms + t) * padded_k + p));
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv, wv[c]);
    }
  }
}

// R rows of x against C consecutive weight rows: R * C accumulators (at most 16 of 32 zmm).
template <int R, int C, int Terms>
FLASHQ_INLINE FLASHQ_AVX512_BF16 void dot_tile(const uint16_t* x, int64_t padded_k, const uint16_t* w, float* y,
                                               int64_t n, int64_t k) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) dot_chunk<R, C, Terms>(acc, x, padded_k, w, k, p, ~__mmask32{0});
  if (p < k) dot_chunk<R, C, Terms>(acc, x, padded_k, w, k, p, mask32(k - p));
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) y[r * n + c] = _mm512_reduce_add_ps(acc[r][c]);
  }
}

template <int C, int Terms>
FLASHQ_AVX512_BF16 void dot_rows(const uint16_t* x, int64_t padded_k, const uint16_t* w, float* y, int64_t rows,
                                 int64_t n, int64_t k) {
  const int64_t x_row = Terms * padded_k;
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) dot_tile<4, C, Terms>(x + i * x_row, padded_k, w, y + i * n, n, k);
  switch (rows - i) {
    case 3: dot_tile<3, C, Terms>(x + i * x_row, padded_k, w, y + i * n, n, k); break;
    case 2: dot_tile<2, C, Terms>(x + i * x_row, padded_k, w, y + i * n, n, k); break;
    case 1: dot_tile<1, C, Terms>(x + i * x_row, padded_k, w, y + i * n, n, k); break;
    default: break;
  }
}

// Weight rows [j, j + cols) against rows [i0, i0 + rows) of x. One row (decode) takes 8 weight
// rows at a time, so that 8 independent sums hide vdpbf16ps's latency.
template <int Terms>
FLASHQ_AVX512_BF16 void dot_panel(const Operands& o, int64_t j, int64_t cols, int64_t i0, int64_t rows) {
  const auto* x = static_cast<const uint16_t*>(o.x) + i0 * o.x_row;
  const uint16_t* w = o.w + j * o.k;
  float* y = o.y + i0 * o.n + j;
  if (rows == 1 && cols == 8) return dot_tile<1, 8, Terms>(x, o.padded_k, w, y, o.n, o.k);
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4) dot_rows<4, Terms>(x, o.padded_k, w + c * o.k, y + c, rows, o.n, o.k);
  for (; c < cols; ++c) dot_rows<1, Terms>(x, o.padded_k, w + c * o.k, y + c, rows, o.n, o.k);
}

// ---- float32 FMAs on 16 lanes, bf16 weights widened in registers ----

template <int R, int C>
FLASHQ_INLINE FLASHQ_AVX512 void fma_chunk(__m512 (&acc)[R][C], const float* x, const uint16_t* w, int64_t k,
                                           int64_t p, __mmask16 mask) {
  __m512 wv[C];
  for (int c = 0; c < C; ++c) {
    const __m256i raw = _mm256_maskz_loadu_epi16(mask, w + c * k + p);
    wv[c] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  }
  for (int r = 0; r < R; ++r) {
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + r * k + p);
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
  }
}

template <int R, int C>
FLASHQ_INLINE FLASHQ_AVX512 void fma_tile(const float* x, const uint16_t* w, float* y, int64_t n, int64_t k) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) fma_chunk<R, C>(acc, x, w, k, p, static_cast<__mmask16>(0xffff));
  if (p < k) fma_chunk<R, C>(acc, x, w, k, p, mask16(k - p));
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) y[r * n + c] = _mm512_reduce_add_ps(acc[r][c]);
  }
}

template <int C>
FLASHQ_AVX512 void fma_rows(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t n, int64_t k) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) fma_tile<4, C>(x + i * k, w, y + i * n, n, k);
  switch (rows - i) {
    case 3: fma_tile<3, C>(x + i * k, w, y + i * n, n, k); break;
    case 2: fma_tile<2, C>(x + i * k, w, y + i * n, n, k); break;
    case 1: fma_tile<1, C>(x + i * k, w, y + i * n, n, k); break;
    default: break;
  }
}

FLASHQ_AVX512 void fma_panel(const Operands& o, int64_t j, int64_t cols, int64_t i0, int64_t rows) {
  const float* x = static_cast<const float*>(o.x) + i0 * o.k;
  const uint16_t* w = o.w + j * o.k;
  float* y = o.y + i0 * o.n + j;
  if (rows == 1 && cols == 8) return fma_tile<1, 8>(x, w, y, o.n, o.k);
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4) fma_rows<4>(x, w + c * o.k, y + c, rows, o.n, o.k);
  for (; c < cols; ++c) fma_rows<1>(x, w + c * o.k, y + c, rows, o.n, o.k);
}

// ---- the pass: activations converted once, then panels of weight rows over the threads ----

using PanelFn = void (*)(const Operands&, int64_t j, int64_t cols, int64_t i0, int64_t rows);

// Bf16 terms of the activations; reused from call to call (it only grows).
std::vector<uint16_t>& activation_buffer() {
  thread_local std::vector<uint16_t> buffer;
  return buffer;
}

}  // namespace

void matmul_bf16_avx512(const float* x, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                        MatmulPath path) {
  const int terms = path == MatmulPath::kAvx512Bf16 ? 2 : 1;
  const bool dot = path != MatmulPath::kAvx512;
  Operands o{x, k, 0, w, y, n, k};
  PanelFn panel = fma_panel;
  if (dot) {
    o.padded_k = (k + 31) / 32 * 32;
    o.x_row = terms * o.padded_k;
    std::vector<uint16_t>& buffer = activation_buffer();
    if (buffer.size() < static_cast<size_t>(m * o.x_row)) buffer.resize(static_cast<size_t>(m * o.x_row));
    o.x = buffer.data();
    panel = terms == 2 ? dot_panel<2> : dot_panel<1>;
  }
  uint16_t* converted = dot ? activation_buffer().data() : nullptr;
  const int64_t width = m == 1 ? 8 : 4;
  const int64_t panels = (n + width - 1) / width;
  // Below about a million multiply-adds, waking a second thread costs more than it saves.
#pragma omp parallel if (m * n * k >= (int64_t{1} << 20))
  {
    if (dot) {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < m; ++i) to_bf16_terms(x + i * k, k, terms, o.padded_k, converted + i * o.x_row);
    }
    for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, m - i0);
#pragma omp for schedule(static) nowait
      for (int64_t t = 0; t < panels; ++t) panel(o, t * width, std::min(width, n - t * width), i0, rows);
    }
  }
}

}  // namespace flashq::cpu
