#include "worker/model/target_model.h"

#include <algorithm>

#include "shared/error.h"

namespace flashq {
namespace {

constexpr int64_t kMinStateSnapshots = 16, kMaxStateSnapshots = 256;

}  // namespace

void TargetModel::set_kv_cache_dtype(DType dtype) {
  check_invariant(dtype == DType::kF32 || dtype == DType::kBF16, "a KV cache holds float32 or bf16");
  kv_cache_dtype_ = dtype;
}

int64_t TargetModel::paged_layer_slots() const {
  const std::vector<int64_t> windows = attention_windows(config());
  const auto windowed = static_cast<int64_t>(std::count_if(windows.begin(), windows.end(), [](int64_t w) { return w > 0; }));
  const auto attending = static_cast<int64_t>(attention_layers(config()).size());
  return std::max(windowed, attending - windowed);
}

std::unique_ptr<RecurrentState> TargetModel::make_recurrent_state() const {
  const ModelConfig& c = config();
  const auto linear = static_cast<int64_t>(
      std::count(c.linear_attention.layers.begin(), c.linear_attention.layers.end(), true));
  if (linear == 0) return nullptr;
  return std::make_unique<RecurrentState>(backend(), c.linear_attention, linear);
}

int64_t TargetModel::paged_bytes_per_block(int64_t block_size) const {
  const ModelConfig& c = config();
  return PagedKvStore::bytes_per_block(paged_layer_slots(), c.num_kv_heads, c.head_dim, block_size, kv_cache_dtype_);
}

std::unique_ptr<PagedKvStore> TargetModel::make_paged_store(int64_t blocks, int64_t block_size, CachePool* pool,
                                                            KvShape draft_context) const {
  const ModelConfig& c = config();
  const bool windows = !attention_windows(c).empty();
  const WindowedLayers windowed{windows ? c.sliding_window : 0, windows ? KvCache::kMaxRowsPerPass : 0};
  auto store = std::make_unique<PagedKvStore>(backend(), paged_layer_slots(), c.num_kv_heads, c.head_dim, blocks,
                                              block_size, pool, draft_context, kv_cache_dtype_, windowed);
  if (const std::unique_ptr<RecurrentState> state = make_recurrent_state()) {
    // Snapshots take up to a quarter of the store's bytes beside it, and at least 16 whatever that
    // is (a hybrid's attention layers are few, so its store is small beside its state).
    const int64_t capacity = std::clamp<int64_t>(store->memory_bytes() / 4 / std::max<int64_t>(state->state_bytes(), 1),
                                                 kMinStateSnapshots, kMaxStateSnapshots);
    store->keep_state_snapshots(c.linear_attention, state->layers(), capacity);
  }
  return store;
}

KvCache TargetModel::make_cache(int64_t max_length, PagedKvStore& store) const {
  KvCache cache(store, std::min(max_length, config().max_position_embeddings), attention_windows(config()));
  cache.attach_recurrent_state(make_recurrent_state());
  return cache;
}

}  // namespace flashq
