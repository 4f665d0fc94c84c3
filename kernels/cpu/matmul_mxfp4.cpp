#include "kernels/cpu/matmul_mxfp4.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_mxfp4_avx512.h"
#include "kernels/cpu/matmul_path.h"
#include "kernels/cpu/simd.h"

namespace flashq::cpu {
namespace {

constexpr int64_t kBlock = 32;       // weights per scale
constexpr int64_t kBlockBytes = 16;  // two codes a byte

// Half of each E8M0 scale, 2^(s - 128): the table of codes below holds twice the E2M1 values, so
// that they are whole numbers in int8.
const std::array<float, 256>& half_scales() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int s = 0; s < 256; ++s) t[static_cast<size_t>(s)] = std::ldexp(1.0f, s - 128);
    return t;
  }();
  return table;
}

// The 32 weights of one block as four vectors of 8 (elements 0-7, 8-15, 16-23, 24-31). Byte i
// holds element 2i in its low nibble and 2i + 1 in its high one.
struct DecodedBlock {
  __m256 w[4];
};

inline DecodedBlock decode_block(const uint8_t* codes, float half_scale) {
  // 2 x E2M1: codes 0-7 are {0, 0.5, 1, 1.5, 2, 3, 4, 6}, 8-15 the same negated.
  const __m128i doubled = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  const __m128i even = _mm_shuffle_epi8(doubled, _mm_and_si128(bytes, nibble));
  const __m128i odd = _mm_shuffle_epi8(doubled, _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble));
  const __m128i first = _mm_unpacklo_epi8(even, odd);   // elements 0-15 in order
  const __m128i second = _mm_unpackhi_epi8(even, odd);  // 16-31
  const __m256 scale = _mm256_set1_ps(half_scale);
  auto widen = [&](__m128i eight) { return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight)), scale); };
  return {{widen(first), widen(_mm_srli_si128(first, 8)), widen(second), widen(_mm_srli_si128(second, 8))}};
}

// R rows of x against C consecutive weight rows: R * C accumulators (at most 8 of AVX2's 16, so
// a decoded block and the x vectors stay in registers too).
template <int R, int C>
inline void multiply_tile(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t n,
                          int64_t k) {
  const std::array<float, 256>& half = half_scales();
  const int64_t row_bytes = k / 2, row_scales = k / kBlock;
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < row_scales; ++b) {
    for (int c = 0; c < C; ++c) {
      const DecodedBlock w = decode_block(blocks + c * row_bytes + b * kBlockBytes, half[scales[c * row_scales + b]]);
      for (int r = 0; r < R; ++r) {
        const float* xr = x + r * k + b * kBlock;
        for (int q = 0; q < 4; ++q) acc[r][c] = _mm256_fmadd_ps(w.w[q], _mm256_loadu_ps(xr + 8 * q), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) y[r * n + c] = hsum(acc[r][c]);
  }
}

// All rows of x, in groups of up to 4, against C weight rows starting at row j.
template <int C>
void multiply_weight_rows(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                          int64_t k, int64_t j) {
  const uint8_t* bj = blocks + j * (k / 2);
  const uint8_t* sj = scales + j * (k / kBlock);
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) multiply_tile<4, C>(x + i * k, bj, sj, y + i * n + j, n, k);
  switch (m - i) {
    case 3:
      multiply_tile<3, C>(x + i * k, bj, sj, y + i * n + j, n, k);
      break;
    case 2:
      multiply_tile<2, C>(x + i * k, bj, sj, y + i * n + j, n, k);
      break;
    case 1:
      multiply_tile<1, C>(x + i * k, bj, sj, y + i * n + j, n, k);
      break;
    default:
      break;
  }
}

// Few rows: bound by reading the weights. One row (decode) takes 4 weight rows per tile, so four
// independent sums hide the FMA latency; more rows take 2 (4 x 2 accumulators).
void stream_rows(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                 int64_t k) {
  const int64_t tile = m == 1 ? 4 : 2;
  const int64_t tiles = n / tile;
  // Below about a million multiply-adds, waking a second thread costs more than it saves.
#pragma omp parallel for schedule(static) if (m * n * k >= (int64_t{1} << 20))
  for (int64_t t = 0; t < tiles; ++t) {
    if (m == 1) {
      multiply_weight_rows<4>(x, blocks, scales, y, m, n, k, t * tile);
    } else {
      multiply_weight_rows<2>(x, blocks, scales, y, m, n, k, t * tile);
    }
  }
  for (int64_t j = tiles * tile; j < n; ++j) multiply_weight_rows<1>(x, blocks, scales, y, m, n, k, j);
}

// Many rows: panels of about 1 MiB of weight rows decoded to float32 and multiplied by a
// single-threaded sgemm per OpenMP thread (OpenBLAS's own threads would fight OpenMP's).
void gemm_by_panels(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                    int64_t k) {
  const std::array<float, 256>& half = half_scales();
  const int64_t panel_rows = std::clamp<int64_t>((int64_t{1} << 18) / k, 16, n);
  const int64_t panels = (n + panel_rows - 1) / panel_rows;
#pragma omp parallel
  {
    std::vector<float> panel(static_cast<size_t>(panel_rows * k));
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t j0 = p * panel_rows;
      const int64_t rows = std::min(panel_rows, n - j0);
      for (int64_t j = 0; j < rows; ++j) {
        for (int64_t b = 0; b < k / kBlock; ++b) {
          const DecodedBlock w =
              decode_block(blocks + (j0 + j) * (k / 2) + b * kBlockBytes, half[scales[(j0 + j) * (k / kBlock) + b]]);
          float* to = panel.data() + j * k + b * kBlock;
          for (int q = 0; q < 4; ++q) _mm256_storeu_ps(to + 8 * q, w.w[q]);
        }
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(rows),
                  static_cast<int>(k), 1.0f, x, static_cast<int>(k), panel.data(), static_cast<int>(k), 0.0f, y + j0,
                  static_cast<int>(n));
    }
  }
}

}  // namespace

void matmul_mxfp4(const float* x, const uint8_t* blocks, const uint8_t* scales, float* y, int64_t m, int64_t n,
                  int64_t k) {
  if (m == 0 || n == 0) return;
  if (matmul_path() != MatmulPath::kAvx2) return matmul_mxfp4_avx512(x, blocks, scales, y, m, n, k);
  if (m <= kStreamingMaxRows || k == 0) {
    stream_rows(x, blocks, scales, y, m, n, k);
    return;
  }
  static const bool single_threaded_blas = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded_blas;
  gemm_by_panels(x, blocks, scales, y, m, n, k);
}

}  // namespace flashq::cpu
