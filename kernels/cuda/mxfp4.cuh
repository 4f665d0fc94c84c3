// Device helpers for weights that are dense or MXFP4 (kernels/linear_weight.h): one element
// decoded from its definition, and a warp's dot product of a weight row with a row of x. Written
// to be plainly correct, not fast: every element is decoded on its own.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_linear.h"
#include "kernels/cuda/device_math.cuh"

namespace flashq::cuda {

// FP4 E2M1 code c (sign, 2 exponent bits, 1 mantissa bit, bias 1): (-1)^s * 0.5 * m when the
// exponent e is 0, else (-1)^s * 2^(e - 1) * (1 + 0.5 * m). Codes 0-7: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
__device__ inline float e2m1_value(unsigned code) {
  const unsigned e = (code >> 1) & 3u, m = code & 1u;
  const float magnitude = e == 0 ? 0.5f * static_cast<float>(m) : ldexpf(1.0f + 0.5f * static_cast<float>(m), e - 1);
  return (code & 8u) ? -magnitude : magnitude;
}

// Element (row, p) of MXFP4 blocks [rows, k / 2] with scales [rows, k / 32]: byte p / 2 of the
// row, its low nibble for even p, times 2^(scale - 127).
__device__ inline float mxfp4_weight(const uint8_t* blocks, const uint8_t* scales, int64_t row, int64_t p, int64_t k) {
  const uint8_t byte = blocks[row * (k / 2) + p / 2];
  const unsigned code = (p & 1) ? byte >> 4 : byte & 0x0fu;
  return ldexpf(e2m1_value(code), static_cast<int>(scales[row * (k / 32) + p / 32]) - 127);
}

__device__ inline float linear_weight_at(const DeviceLinear& w, int64_t row, int64_t p) {
  if (w.scales != nullptr) return mxfp4_weight(static_cast<const uint8_t*>(w.weight), w.scales, row, p, w.in);
  return weight_at(w.weight, w.dtype, row * w.in + p);
}

// Row `row` of w times x (w.in floats), plus the row's bias: every lane of the warp gets it.
// Lane l takes elements l, l + 32, ...; then a butterfly sum.
__device__ inline float warp_linear_row(const DeviceLinear& w, int64_t row, const float* x, int lane) {
  float acc = 0.0f;
  for (int64_t p = lane; p < w.in; p += kWarpSize) acc = fmaf(linear_weight_at(w, row, p), x[p], acc);
  const float sum = warp_sum(acc);
  return w.bias != nullptr ? sum + weight_at(w.bias, w.bias_dtype, row) : sum;
}

}  // namespace flashq::cuda
