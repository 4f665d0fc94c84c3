#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

namespace flashq::cpu {

void rope(float* x, const int32_t* positions, const RopeOptions& rope, int64_t rows, int64_t heads, int64_t head_dim) {
  // Dims past the rotary ones (partial rotary) pass through.
  const int64_t rotary = rope_rotary_dims(rope, head_dim), half = rotary / 2;
  const float attention_factor = rope_attention_factor(rope);  // 1 but for yarn: exact then
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = rope_inverse_frequency(rope, i, rotary);
  }
#pragma omp parallel for schedule(static) if (rows * heads * head_dim >= (int64_t{1} << 16))
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      // The angle in double, then rounded, as the float32 reference computes pos * inv_freq.
      const float angle = static_cast<float>(positions[r] * static_cast<double>(static_cast<float>(inv_freq[i])));
      cos_v[i] = std::cos(angle) * attention_factor;
      sin_v[i] = std::sin(angle) * attention_factor;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos_v[i] - b * sin_v[i];
        v[i + half] = b * cos_v[i] + a * sin_v[i];
      }
    }
  }
}

}  // namespace flashq::cpu
