// Element-wise CPU ops: residual add and the SwiGLU gate (twin: kernels/cuda/elementwise.cu).
#pragma once

#include <cstdint>

namespace flashq::cpu {

void add(float* h, const float* delta, int64_t count);
// out = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
void swiglu(const float* gate, const float* up, float* out, int64_t count);

}  // namespace flashq::cpu
