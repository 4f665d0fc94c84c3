#include "kernels/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/cpu/matmul_avx512.h"
#include "kernels/cpu/matmul_path.h"
#include "kernels/cpu/simd.h"
#include "shared/error.h"

namespace flashq::cpu {
namespace {

// One tile: R rows of x against C consecutive weight rows, one 8-lane accumulator per output
// element, k in order, then a horizontal sum and a scalar tail. Every output element is computed
// the same way whatever R and C are, so a row's result does not depend on which other rows share
// the call: decoding one token, verifying a block and running a batch give bit-identical logits.
// R * C accumulators stay in registers (at most 12 of AVX2's 16).
template <int R, int C, typename W>
inline void multiply_tile(const float* x, const W* w, float* y, int64_t n, int64_t k) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load8(w + c * k + p);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * k + p);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float sum = hsum(acc[r][c]);
      for (int64_t q = p; q < k; ++q) sum += to_f32(w[c * k + q]) * x[r * k + q];
      y[r * n + c] = sum;
    }
  }
}

// All rows of x (in groups of up to 4) against C weight rows starting at row j.
template <int C, typename W>
inline void multiply_weight_rows(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k, int64_t j) {
  const W* wj = w + j * k;
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) multiply_tile<4, C>(x + i * k, wj, y + i * n + j, n, k);
  switch (m - i) {
    case 3: multiply_tile<3, C>(x + i * k, wj, y + i * n + j, n, k); break;
    case 2: multiply_tile<2, C>(x + i * k, wj, y + i * n + j, n, k); break;
    case 1: multiply_tile<1, C>(x + i * k, wj, y + i * n + j, n, k); break;
    default: break;
  }
}

// Few rows: bound by reading the weights, which are widened once per tile and used for every
// row of x while they sit in L1. One row (decode) takes 8 weight rows per tile so enough
// independent accumulators hide the FMA latency; more rows take 3 (4 x 3 accumulators).
template <typename W>
void stream_rows(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k) {
  const int64_t tile = m == 1 ? 8 : 3;
  const int64_t tiles = n / tile;
  // Below about a million multiply-adds, waking a second thread costs more than it saves.
#pragma omp parallel for schedule(static) if (m * n * k >= (int64_t{1} << 20))
  for (int64_t t = 0; t < tiles; ++t) {
    if (m == 1) {
      multiply_weight_rows<8>(x, w, y, m, n, k, t * tile);
    } else {
      multiply_weight_rows<3>(x, w, y, m, n, k, t * tile);
    }
  }
  for (int64_t j = tiles * tile; j < n; ++j) multiply_weight_rows<1>(x, w, y, m, n, k, j);
}

// Weights widened to f32 in panels of about 1 MiB; each OpenMP thread takes whole panels and
// multiplies them with a single-threaded sgemm into its columns of y. One thread pool (OpenMP)
// does all the work: OpenBLAS's own threads would fight OpenMP's spinning workers for the cores.
template <typename W>
void gemm_by_panels(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k) {
  const int64_t panel_rows = std::clamp<int64_t>((int64_t{1} << 18) / std::max<int64_t>(k, 1), 16, n);
  const int64_t panels = (n + panel_rows - 1) / panel_rows;
#pragma omp parallel
  {
    std::vector<float> panel(static_cast<size_t>(panel_rows * k));
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t j0 = p * panel_rows;
      const int64_t rows = std::min(panel_rows, n - j0);
      const W* src = w + j0 * k;
      for (int64_t i = 0; i < rows * k; ++i) panel[static_cast<size_t>(i)] = to_f32(src[i]);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(rows),
                  static_cast<int>(k), 1.0f, x, static_cast<int>(k), panel.data(), static_cast<int>(k), 0.0f,
                  y + j0, static_cast<int>(n));
    }
  }
}

template <typename W>
void matmul_typed(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k) {
  if (m <= kStreamingMaxRows) {
    stream_rows(x, w, y, m, n, k);
  } else {
    gemm_by_panels(x, w, y, m, n, k);
  }
}

}  // namespace

void matmul(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  static const bool single_threaded_blas = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded_blas;
  switch (w_dtype) {
    case DType::kF32:
      if (m <= kStreamingMaxRows) {
        stream_rows(x, static_cast<const float*>(w), y, m, n, k);
      } else {
        gemm_by_panels(x, static_cast<const float*>(w), y, m, n, k);
      }
      return;
    case DType::kBF16:
      if (const MatmulPath path = matmul_path(); path != MatmulPath::kAvx2) {
        return matmul_bf16_avx512(x, static_cast<const uint16_t*>(w), y, m, n, k, path);
      }
      return matmul_typed(x, static_cast<const uint16_t*>(w), y, m, n, k);
    case DType::kF16: return matmul_typed(x, static_cast<const F16*>(w), y, m, n, k);
    case DType::kI32:
    case DType::kU8: break;
  }
  throw Error(ErrorCode::kInternal, "matmul: weights must be f32, f16 or bf16");
}

void matmul_reference(const float* x, const void* w, DType w_dtype, float* y, int64_t m, int64_t n,
                      int64_t k) {
  auto weight = [&](int64_t j, int64_t p) -> double {
    switch (w_dtype) {
      case DType::kF32: return static_cast<const float*>(w)[j * k + p];
      case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(w)[j * k + p]);
      case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(w)[j * k + p]);
      case DType::kI32:
      case DType::kU8: break;
    }
    return 0.0;
  };
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) sum += weight(j, p) * x[i * k + p];
      y[i * n + j] = static_cast<float>(sum);
    }
  }
}

}  // namespace flashq::cpu
