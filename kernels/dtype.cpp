#include "kernels/dtype.h"

#include <immintrin.h>

namespace flashq {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kU8: return "U8";
  }
  return "?";
}

// F16C is part of the x86-64-v3 baseline we build for.
float f16_to_f32(uint16_t bits) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits))); }
uint16_t f32_to_f16(float value) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(value), _MM_FROUND_TO_NEAREST_INT), 0));
}

}  // namespace flashq
