// A linear layer's bias on the CPU (twin: kernels/cuda/bias.cu): y[m, n] += bias[n], bias in a
// weight's dtype, widened to float32 as the matmul widens its weights.
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_view.h"

namespace flashq::cpu {

void add_bias(float* y, WeightVector bias, int64_t rows, int64_t cols);

}  // namespace flashq::cpu
