// Rotary position embedding, rotate-half (NeoX) pairing: element i pairs with i + head_dim/2,
// inv_freq[i] = theta^(-2i/head_dim) (twin: kernels/cuda/rope.cu).
#pragma once

#include <cstdint>

namespace flashq::cpu {

// x[rows, heads, head_dim] rotated in place; row r at positions[r].
void rope(float* x, const int32_t* positions, float theta, int64_t rows, int64_t heads, int64_t head_dim);

}  // namespace flashq::cpu
