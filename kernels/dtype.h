// Element types of tensors and the conversions between them. Compute is float32 everywhere on
// the CPU; weights may stay in their checkpoint dtype (bf16, f16, f32) and are widened on load
// into registers. kU8 is raw bytes: MXFP4 weights (FP4 blocks and E8M0 scales,
// kernels/linear_weight.h) are kept as their checkpoint stores them and decoded inside the kernels.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flashq {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kU8 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);

inline float bf16_to_f32(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

}  // namespace flashq
