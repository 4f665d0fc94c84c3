// Grouped-query attention on the CPU. q[M, Hq, D]; k, v[T, Hkv, D]; query row m attends keys
// [0, key_counts[m]). Causal verification blocks, non-causal draft blocks and plain decode are
// all this one operation with different key counts (twin: kernels/cuda/attention.cu).
#pragma once

#include <cstdint>

namespace flashq::cpu {

struct AttentionShape {
  int64_t rows;      // M
  int64_t q_heads;   // Hq
  int64_t kv_heads;  // Hkv, divides Hq
  int64_t head_dim;  // D
};

void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out,
               AttentionShape shape);

}  // namespace flashq::cpu
