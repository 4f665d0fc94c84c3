#include "worker/model/paged_kv_store.h"

#include <string>

#include "shared/error.h"

namespace flashq {

int64_t PagedKvStore::bytes_per_block(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t block_size,
                                      DType dtype) {
  return 2 * layers * block_size * kv_heads * head_dim * static_cast<int64_t>(dtype_size(dtype));
}

PagedKvStore::PagedKvStore(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t blocks,
                           int64_t block_size, CachePool* pool, KvShape draft_context, DType dtype,
                           WindowedLayers windowed)
    : backend_(backend), blocks_(blocks, block_size, windowed) {
  const int64_t rows = blocks * block_size;
  const int64_t target_elements = 2 * layers * rows * kv_heads * head_dim;
  const int64_t draft_elements = 2 * draft_context.layers * rows * draft_context.kv_heads * draft_context.head_dim;
  const Shape shape{target_elements + draft_elements};
  if (pool != nullptr) {
    std::optional<Tensor> run = pool->try_allocate(dtype, shape);
    if (!run) {
      const auto bytes = (target_elements + draft_elements) * static_cast<int64_t>(dtype_size(dtype));
      throw Error(ErrorCode::kInvalidArgument, "a paged KV cache of " + std::to_string(blocks) + " blocks needs " +
                                                   std::to_string(bytes) +
                                                   " bytes; the cache pool's longest free run is " +
                                                   std::to_string(pool->largest_free_bytes()));
    }
    memory_ = std::move(*run);
  } else {
    memory_ = backend.allocate(dtype, shape);
  }
  // Each store a view of its own run of the memory: [rows, kv_heads, head_dim].
  int64_t offset = 0;
  auto carve = [&](int64_t heads, int64_t dim) {
    Tensor store = memory_.slice_rows(offset, rows * heads * dim).reshape({rows, heads, dim});
    offset += rows * heads * dim;
    return store;
  };
  for (int64_t layer = 0; layer < layers; ++layer) {
    keys_.push_back(carve(kv_heads, head_dim));
    values_.push_back(carve(kv_heads, head_dim));
  }
  for (int64_t layer = 0; layer < draft_context.layers; ++layer) {
    draft_keys_.push_back(carve(draft_context.kv_heads, draft_context.head_dim));
    draft_values_.push_back(carve(draft_context.kv_heads, draft_context.head_dim));
  }
}

void PagedKvStore::copy_block(const BlockCopy& copy) {
  const int64_t b = block_size();
  for (std::vector<Tensor>* stores : {&keys_, &values_, &draft_keys_, &draft_values_}) {
    for (Tensor& store : *stores) {
      // Distinct blocks never overlap, so the rows can be copied in place.
      backend_.copy_rows(store.slice_rows(copy.from * b, copy.rows), store, copy.to * b);
    }
  }
}

void PagedKvStore::keep_state_snapshots(const LinearAttentionConfig& shape, int64_t linear_layers, int64_t capacity) {
  snapshots_ = std::make_unique<StateSnapshots>(backend_, shape, linear_layers, capacity, blocks_);
}

}  // namespace flashq
