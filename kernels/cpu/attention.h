// Grouped-query attention on the CPU. q[M, Hq, D]; k, v[T, Hkv, D]; query row m attends keys
// [0, key_counts[m]). Causal verification blocks, non-causal draft blocks and plain decode are
// all this one operation with different key counts (twin: kernels/cuda/attention.cu; with sinks
// or a window, kernels/cuda/attention_windowed.cu).
#pragma once

#include <cstdint>

namespace flashq::cpu {

struct AttentionShape {
  int64_t rows;      // M
  int64_t q_heads;   // Hq
  int64_t kv_heads;  // Hkv, divides Hq
  int64_t head_dim;  // D
};

// What gpt-oss adds (kernels/backend.h, AttentionOptions): a sink logit per query head (null:
// none), and a window (0: none) over keys that are a ring of `ring_rows` rows: position p at row
// p % ring_rows. And what a paged KV cache adds: keys in blocks of `block_size` rows, position p
// at row block_table[p / block_size] * block_size + p % block_size (null table: row p). With a
// block size that is a multiple of 8 a row's result has the bits of the same keys in one run.
struct AttentionExtras {
  const float* sinks = nullptr;  // [Hq]
  int64_t sliding_window = 0;
  int64_t ring_rows = 0;                 // T, at least the window; read only with one
  const int32_t* block_table = nullptr;  // with a window, only its entries the window reaches are read
  int64_t block_size = 0;
  const int32_t* key_starts = nullptr;  // [M], row m's first position (null: 0)
};

// With a window W, row m with key_counts[m] = c attends positions [max(0, c - W), c); with key
// starts, from key_starts[m] when that is later.
void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out,
               AttentionShape shape, const AttentionExtras& extras = {});
// The same over a bf16 cache (k and v as bf16 bits), widened as they are loaded: the bits of the
// float32 call over the same values.
void attention(const float* q, const uint16_t* k, const uint16_t* v, const int32_t* key_counts, float* out,
               AttentionShape shape, const AttentionExtras& extras = {});

}  // namespace flashq::cpu
