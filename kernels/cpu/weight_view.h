// Reads one element of a weight vector of any dtype as float32; used by the small per-row ops
// (norm weights) where widening cost does not matter.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cpu {

struct WeightVector {
  const void* data;
  DType dtype;

  float operator[](int64_t i) const {
    switch (dtype) {
      case DType::kF32: return static_cast<const float*>(data)[i];
      case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
      case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
      case DType::kI32:
      case DType::kU8: break;
    }
    return 0.0f;
  }
};

}  // namespace flashq::cpu
