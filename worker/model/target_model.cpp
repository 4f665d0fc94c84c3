#include "worker/model/target_model.h"

#include <algorithm>

#include "shared/error.h"

namespace flashq {

void TargetModel::set_kv_cache_dtype(DType dtype) {
  check_invariant(dtype == DType::kF32 || dtype == DType::kBF16, "a KV cache holds float32 or bf16");
  kv_cache_dtype_ = dtype;
}

bool TargetModel::pages_kv() const {
  const std::vector<bool>& sliding = config().sliding_layers;
  return std::none_of(sliding.begin(), sliding.end(), [](bool s) { return s; });
}

int64_t TargetModel::paged_bytes_per_block(int64_t block_size) const {
  const ModelConfig& c = config();
  return PagedKvStore::bytes_per_block(c.num_layers, c.num_kv_heads, c.head_dim, block_size, kv_cache_dtype_);
}

std::unique_ptr<PagedKvStore> TargetModel::make_paged_store(int64_t blocks, int64_t block_size, CachePool* pool,
                                                            KvShape draft_context) const {
  if (!pages_kv()) {
    throw Error(ErrorCode::kUnsupported,
                "a model with sliding-window layers keeps whole-length KV caches, not a paged one (--kv-block-size 0)");
  }
  const ModelConfig& c = config();
  return std::make_unique<PagedKvStore>(backend(), c.num_layers, c.num_kv_heads, c.head_dim, blocks, block_size, pool,
                                        draft_context, kv_cache_dtype_);
}

KvCache TargetModel::make_cache(int64_t max_length, PagedKvStore& store) const {
  return KvCache(store, std::min(max_length, config().max_position_embeddings));
}

}  // namespace flashq
