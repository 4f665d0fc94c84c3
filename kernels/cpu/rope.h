// Rotary position embedding, rotate-half (NeoX) pairing: element i pairs with i + head_dim/2,
// inv_freq[i] = rope_inverse_frequency(rope, i, head_dim), theta^(-2i/head_dim) when unscaled,
// cos and sin multiplied by rope_attention_factor(rope) (twin: kernels/cuda/rope.cu).
#pragma once

#include <cstdint>

#include "kernels/rope_frequency.h"

namespace flashq::cpu {

// x[rows, heads, head_dim] rotated in place; row r at positions[r].
void rope(float* x, const int32_t* positions, const RopeOptions& rope, int64_t rows, int64_t heads, int64_t head_dim);

}  // namespace flashq::cpu
