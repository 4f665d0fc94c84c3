#include "worker/model/paged_kv_store.h"

#include <string>

#include "shared/error.h"

namespace flashq {

int64_t PagedKvStore::bytes_per_block(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t block_size) {
  return 2 * layers * block_size * kv_heads * head_dim * static_cast<int64_t>(sizeof(float));
}

PagedKvStore::PagedKvStore(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t blocks,
                           int64_t block_size, CachePool* pool)
    : backend_(backend), blocks_(blocks, block_size) {
  const int64_t rows = blocks * block_size;
  const Shape shape{2 * layers * rows, kv_heads, head_dim};
  if (pool != nullptr) {
    std::optional<Tensor> run = pool->try_allocate(DType::kF32, shape);
    if (!run) {
      throw Error(ErrorCode::kInvalidArgument,
                  "a paged KV cache of " + std::to_string(blocks) + " blocks needs " +
                      std::to_string(blocks * bytes_per_block(layers, kv_heads, head_dim, block_size)) +
                      " bytes; the cache pool's longest free run is " + std::to_string(pool->largest_free_bytes()));
    }
    memory_ = std::move(*run);
  } else {
    memory_ = backend.allocate(DType::kF32, shape);
  }
  for (int64_t layer = 0; layer < layers; ++layer) {
    keys_.push_back(memory_.slice_rows(2 * layer * rows, rows));
    values_.push_back(memory_.slice_rows((2 * layer + 1) * rows, rows));
  }
}

void PagedKvStore::copy_block(const BlockCopy& copy) {
  const int64_t b = block_size();
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    for (Tensor* store : {&keys_[layer], &values_[layer]}) {
      // Distinct blocks never overlap, so the rows can be copied in place.
      backend_.copy_rows(store->slice_rows(copy.from * b, copy.rows), *store, copy.to * b);
    }
  }
}

}  // namespace flashq
