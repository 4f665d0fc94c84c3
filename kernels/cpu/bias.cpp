#include "kernels/cpu/bias.h"

#include <vector>

namespace flashq::cpu {

void add_bias(float* y, WeightVector bias, int64_t rows, int64_t cols) {
  std::vector<float> widened(static_cast<size_t>(cols));
  for (int64_t n = 0; n < cols; ++n) widened[n] = bias[n];
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t{1} << 16))
  for (int64_t m = 0; m < rows; ++m) {
    float* row = y + m * cols;
    for (int64_t n = 0; n < cols; ++n) row[n] += widened[n];
  }
}

}  // namespace flashq::cpu
