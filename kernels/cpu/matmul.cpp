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

// Rows of x handled together against one weight row: 4 accumulators stay in registers.
constexpr int64_t kRowGroup = 4;

template <typename W>
void stream_rows(const float* x, const W* w, float* y, int64_t m, int64_t n, int64_t k) {
  const int64_t k8 = k / 8 * 8;
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    const W* wj = w + j * k;
    int64_t i = 0;
    for (; i + kRowGroup <= m; i += kRowGroup) {
      const float* x0 = x + i * k;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      for (int64_t p = 0; p < k8; p += 8) {
        __m256 wv = load8(wj + p);
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + p), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + k + p), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 2 * k + p), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 3 * k + p), a3);
      }
      float s[kRowGroup] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int64_t p = k8; p < k; ++p) {
        float wf = to_f32(wj[p]);
        for (int64_t r = 0; r < kRowGroup; ++r) s[r] += wf * x0[r * k + p];
      }
      for (int64_t r = 0; r < kRowGroup; ++r) y[(i + r) * n + j] = s[r];
    }
    for (; i < m; ++i) {  // leftover rows; for m == 1 this is the decode path
      const float* xi = x + i * k;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      int64_t p = 0;
      for (; p + 16 <= k8; p += 16) {
        a0 = _mm256_fmadd_ps(load8(wj + p), _mm256_loadu_ps(xi + p), a0);
        a1 = _mm256_fmadd_ps(load8(wj + p + 8), _mm256_loadu_ps(xi + p + 8), a1);
      }
      for (; p < k8; p += 8) a0 = _mm256_fmadd_ps(load8(wj + p), _mm256_loadu_ps(xi + p), a0);
      float s = hsum(_mm256_add_ps(a0, a1));
      for (; p < k; ++p) s += to_f32(wj[p]) * xi[p];
      y[i * n + j] = s;
    }
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
