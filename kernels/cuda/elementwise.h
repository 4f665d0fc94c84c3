// Element-wise ops on the GPU (twin: kernels/cpu/elementwise.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashq::cuda {

// h += delta
void add(float* h, const float* delta, int64_t count, cudaStream_t stream);

// out = silu(gate) * up; out may be gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream);

}  // namespace flashq::cuda
