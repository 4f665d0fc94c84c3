// Stores new key and value rows into the caches of several sequences in one launch (twin: the
// copy_rows calls of Backend::store_and_attend's default). Rows [first_row, first_row + rows)
// of k and v go to rows [start, start + rows) of that chunk's cache.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

namespace flashq::cuda {

inline constexpr int kMaxKvStores = 64;  // per launch: they travel in the kernel's parameters

struct KvStore {
  float* k;
  float* v;
  int64_t first_row, rows, start;
};

// row_floats: floats in one row of k (kv_heads * head_dim). At most kMaxKvStores chunks.
void store_kv_rows(const float* k, const float* v, std::span<const KvStore> stores, int64_t total_rows,
                   int64_t row_floats, cudaStream_t stream);

}  // namespace flashq::cuda
