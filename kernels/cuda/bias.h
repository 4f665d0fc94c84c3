// A linear layer's bias on the GPU (twin: kernels/cpu/bias.cpp): y[m, n] += bias[n], bias in a
// weight's dtype, widened to float32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

void add_bias(float* y, const void* bias, DType bias_dtype, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace flashq::cuda
