// Grouped-query attention on the GPU (twin: kernels/cpu/attention.cpp). q[rows, q_heads, D];
// k, v[keys, kv_heads, D]; query row m attends keys [0, key_counts[m]) with scale 1/sqrt(D).
//
// Split over the keys (flash-decoding): a block takes one query row, the query heads of one KV
// head (so each key row is read once for all of them) and one slice of the keys, walks the slice
// in tiles of 64 keys with an online softmax, and leaves an unnormalised partial result; a second
// kernel merges the slices. The number of slices is chosen so that even one decode row fills the
// GPU; with enough rows there is one slice and no merge. A key count beyond `keys` is reported
// through `report` (device_error.h) and clamped; a count <= 0 gives zeros.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_error.h"

namespace flashq::cuda {

// Largest head_dim the kernel handles (Qwen3 and Llama use 128).
inline constexpr int64_t kMaxAttentionHeadDim = 256;

struct AttentionShape {
  int64_t rows, q_heads, kv_heads, head_dim, keys;
};

// Bytes of scratch attention() needs for this shape (0 when it needs none).
size_t attention_scratch_bytes(const AttentionShape& shape);

// `scratch` holds at least attention_scratch_bytes(shape) bytes. Allocates nothing.
void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out,
               AttentionShape shape, void* scratch, DeviceErrorReport* report, cudaStream_t stream);

}  // namespace flashq::cuda
