#include "kernels/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/cpu/simd.h"
#include "shared/error.h"

namespace flashq::cpu {
namespace {

// Dot products of R rows of x with one weight row. Every output element is computed the same
// way whatever R is (two 8-lane accumulators over 16-wide steps, an 8-wide step, a scalar tail),
// so a row's result does not depend on which other rows share the call: decoding one token,
// verifying a block and running a batch give bit-identical logits for the same row.
template <int R, typename W>
inline void dot_rows(const float* x, int64_t k, const W* w, float* out) {
  __m256 even[R], odd[R];
  for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m256 w0 = load8(w + p), w1 = load8(w + p + 8);
    for (int r = 0; r < R; ++r) {
      even[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * k + p), even[r]);
      odd[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + r * k + p + 8), odd[r]);
    }
  }
  if (p + 8 <= k) {
    const __m256 w0 = load8(w + p);
    for (int r = 0; r < R; ++r) even[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * k + p), even[r]);
    p += 8;
  }
  for (int r = 0; r < R; ++r) {
    float sum = hsum(_mm256_add_ps(even[r], odd[r]));
    for (int64_t q = p; q < k; ++q) sum += to_f32(w[q]) * x[r * k + q];
    out[r] = sum;
  }
}

// Few rows: each weight row is widened once and used for all rows of x while it sits in L1.
template <typename W>
void stream_rows(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k) {
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    const W* wj = w + j * k;
    float out[4];
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      dot_rows<4>(x + i * k, k, wj, out);
      for (int r = 0; r < 4; ++r) y[(i + r) * n + j] = out[r];
    }
    const int64_t left = m - i;
    if (left == 3) dot_rows<3>(x + i * k, k, wj, out);
    if (left == 2) dot_rows<2>(x + i * k, k, wj, out);
    if (left == 1) dot_rows<1>(x + i * k, k, wj, out);
    for (int64_t r = 0; r < left; ++r) y[(i + r) * n + j] = out[r];
  }
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
    case DType::kBF16: return matmul_typed(x, static_cast<const uint16_t*>(w), y, m, n, k);
    case DType::kF16: return matmul_typed(x, static_cast<const F16*>(w), y, m, n, k);
    case DType::kI32: break;
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
      case DType::kI32: break;
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
