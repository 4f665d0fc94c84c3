#include "kernels/cpu/elementwise.h"

#include <cmath>

namespace flashq::cpu {

void add(float* h, const float* delta, int64_t count) {
#pragma omp parallel for schedule(static) if (count > 65536)
  for (int64_t i = 0; i < count; ++i) h[i] += delta[i];
}

void swiglu(const float* gate, const float* up, float* out, int64_t count) {
#pragma omp parallel for schedule(static) if (count > 65536)
  for (int64_t i = 0; i < count; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace flashq::cpu
