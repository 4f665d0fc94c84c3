#include "kernels/cpu/rmsnorm.h"

#include <cmath>

namespace flashq::cpu {
namespace {

void normalize_row(const float* x, WeightVector w, float eps, float* y, int64_t dim) {
  double sum_squares = 0.0;  // double: the mean of squares must not lose small rows' precision
  for (int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_squares / dim + eps));
  for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * scale * w[i];
}

}  // namespace

void rmsnorm(const float* x, WeightVector w, float eps, float* y, int64_t rows, int64_t dim) {
#pragma omp parallel for schedule(static) if (rows * dim > 65536)
  for (int64_t r = 0; r < rows; ++r) normalize_row(x + r * dim, w, eps, y + r * dim, dim);
}

void add_rmsnorm(float* h, const float* delta, WeightVector w, float eps, float* y, int64_t rows,
                 int64_t dim) {
#pragma omp parallel for schedule(static) if (rows * dim > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * dim;
    const float* dr = delta + r * dim;
    for (int64_t i = 0; i < dim; ++i) hr[i] += dr[i];
    normalize_row(hr, w, eps, y + r * dim, dim);
  }
}

}  // namespace flashq::cpu
