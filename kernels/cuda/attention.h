// Grouped-query attention on the GPU (twin: kernels/cpu/attention.cpp). q[rows, q_heads, D];
// k, v[keys, kv_heads, D]; query row m attends keys [0, key_counts[m]) with scale 1/sqrt(D).
// First version: one block per (row, query head), each warp takes every fourth key with an
// online softmax, the warps' partial results merged at the end. A key count beyond `keys` is
// reported through `report` (device_error.h) and clamped; a count <= 0 gives zeros.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_error.h"

namespace flashq::cuda {

// Largest head_dim the kernel holds in registers (Qwen3 and Llama use 128).
inline constexpr int64_t kMaxAttentionHeadDim = 256;

struct AttentionShape {
  int64_t rows, q_heads, kv_heads, head_dim, keys;
};

void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out,
               AttentionShape shape, DeviceErrorReport* report, cudaStream_t stream);

}  // namespace flashq::cuda
