#include "tools/flashq_model/random_weights.h"

#include <cstring>

namespace flashq {

std::string RandomWeights::fill(DType dtype, int64_t count, float center, float spread) {
  std::string bytes(static_cast<size_t>(count) * dtype_size(dtype), '\0');
  char* out = bytes.data();
  for (int64_t i = 0; i < count; ++i) {
    const float value = center + symmetric() * spread;
    switch (dtype) {
      case DType::kF32: std::memcpy(out + i * 4, &value, 4); break;
      case DType::kBF16: {
        uint16_t bits = f32_to_bf16(value);
        std::memcpy(out + i * 2, &bits, 2);
        break;
      }
      case DType::kF16: {
        uint16_t bits = f32_to_f16(value);
        std::memcpy(out + i * 2, &bits, 2);
        break;
      }
      case DType::kI32:
      case DType::kU8: break;
    }
  }
  return bytes;
}

}  // namespace flashq
