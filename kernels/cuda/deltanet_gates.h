// The element-wise pieces of the Qwen3.5 / Qwen3-Next layers on the GPU (twin:
// kernels/cpu/deltanet_gates.cpp). Simple: a thread per element (per vector for the norm's sum).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

void delta_rule_gates(const float* a, const float* b, const void* a_log, DType a_log_dtype, const void* dt_bias,
                      DType dt_bias_dtype, int64_t rows, int64_t heads, float* g, float* beta, cudaStream_t stream);
void gated_rmsnorm(const float* x, const float* z, const void* w, DType w_dtype, float eps, int64_t vectors,
                   int64_t dim, float* out, cudaStream_t stream);
// x[i] *= sigmoid(gate[i / per_gate]).
void sigmoid_gate(float* x, const float* gate, int64_t count, int64_t per_gate, cudaStream_t stream);

}  // namespace flashq::cuda
