// Qwen3's per-head RMSNorm of q and k fused with RoPE, in place on x[rows, heads, head_dim]: one
// launch and one pass over the heads instead of two of each (twin: kernels/cpu/head_norm_rope.cpp,
// rmsnorm over the heads, then rope). The norm is computed as cuda::rmsnorm computes it and the
// angles as cuda::rope forms them, so the result is the same as the two kernels one after the
// other.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/rope_frequency.h"

namespace flashq::cuda {

void head_norm_rope(float* x, const void* w, DType w_dtype, float eps, const int32_t* positions, const RopeOptions& rope,
                    int64_t rows, int64_t heads, int64_t head_dim, cudaStream_t stream);

}  // namespace flashq::cuda
