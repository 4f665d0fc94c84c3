// A linear layer's weights as the backend ops take them: y = x * W^T (+ bias), W dense or MXFP4.
//
// MXFP4 (OCP microscaling, FP4 E2M1 elements in blocks of 32 with one E8M0 scale) is kept as the
// checkpoints store it and decoded inside the kernels, never expanded to a dense copy:
//   blocks  u8 [out, in / 2]: two FP4 E2M1 codes a byte, the low nibble the even element (the
//           gpt-oss checkpoints' `*_blocks` [.., out, in / 32, 16], reshaped). Code c is
//           (-1)^(c >> 3) times {0, 0.5, 1, 1.5, 2, 3, 4, 6}[c & 7].
//   scales  u8 [out, in / 32]: the E8M0 exponent s of each run of 32 elements along `in`, which
//           multiplies them by 2^(s - 127).
// So element (n, p) is e2m1(code of byte n * in / 2 + p / 2) * 2^(scales[n, p / 32] - 127).
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace flashq {

// Elements of `in` one E8M0 scale covers.
inline constexpr int64_t kMxfp4BlockSize = 32;

struct LinearWeight {
  Tensor weight;  // dense f32/f16/bf16 [out, in]; for MXFP4 the blocks, u8 [out, in / 2]
  Tensor scales;  // MXFP4 only: u8 [out, in / 32]
  Tensor bias;    // optional [out] (f32/f16/bf16)

  bool mxfp4() const { return scales.defined(); }
  int64_t out_features() const { return weight.dim(0); }
  // Dense: the weight's columns; MXFP4: two elements a byte of the blocks.
  int64_t in_features() const { return mxfp4() ? weight.dim(1) * 2 : weight.dim(1); }
};

}  // namespace flashq
