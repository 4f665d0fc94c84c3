// Rotate-half (NeoX) RoPE in place on x[rows, heads, head_dim], row r at positions[r], on the
// GPU (twin: kernels/cpu/rope.cpp). Angles are formed as the CPU forms them: inv_freq
// (rope_inverse_frequency) in double rounded to float, position * inv_freq in double rounded to float.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/rope_frequency.h"

namespace flashq::cuda {

void rope(float* x, const int32_t* positions, const RopeOptions& rope, int64_t rows, int64_t heads, int64_t head_dim,
          cudaStream_t stream);

}  // namespace flashq::cuda
