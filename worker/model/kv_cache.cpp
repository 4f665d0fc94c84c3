#include "worker/model/kv_cache.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace flashq {

KvCache::KvCache(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t max_length,
                 std::vector<int64_t> windows, DType dtype)
    : backend_(backend),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      max_length_(max_length),
      windows_(std::move(windows)),
      dtype_(dtype),
      keys_(static_cast<size_t>(layers)),
      values_(static_cast<size_t>(layers)) {
  check_invariant(windows_.empty() || static_cast<int64_t>(windows_.size()) == layers, "one window per layer");
  int64_t window = 0;
  for (int64_t w : windows_) {
    // One window for every windowed layer (gpt-oss has one sliding_window), so one ring size.
    check_invariant(w == 0 || window == 0 || w == window, "windowed layers share their window");
    window = std::max(window, w);
  }
  if (window > 0) ring_rows_ = std::min(max_length_, window + kMaxRowsPerPass);
}

KvCache::KvCache(PagedKvStore& store, int64_t max_length, std::vector<int64_t> windows)
    : backend_(store.backend()),
      kv_heads_(0),
      head_dim_(0),
      max_length_(max_length),
      windows_(std::move(windows)),
      paged_(&store),
      table_(std::make_unique<BlockTable>(store.blocks())) {
  int64_t full = 0, windowed_layers = 0;
  if (windows_.empty()) {
    for (int64_t layer = 0; layer < store.layers(); ++layer) store_slots_.push_back(full++);
  }
  for (int64_t w : windows_) {
    check_invariant(w == 0 || w == store.blocks().windowed().window, "the store's pool has the layers' window");
    store_slots_.push_back(w > 0 ? windowed_layers++ : full++);
  }
  check_invariant(std::max(full, windowed_layers) <= store.layers(), "the store has a slot for every layer");
  if (windowed_layers > 0) window_table_ = std::make_unique<WindowTable>(store.blocks());
}

int64_t KvCache::window_slot(int64_t position) const {
  if (window_table_) return window_table_->slot(position);
  check_invariant(ring_rows_ > 0, "a windowed layer's row is asked of a cache with windowed layers");
  return position % ring_rows_;
}

int64_t KvCache::held_blocks() const {
  if (!table_) return 0;
  return static_cast<int64_t>(table_->blocks().size()) + (window_table_ ? window_table_->held() : 0);
}

std::span<const BlockId> KvCache::window_block_ids() const {
  return window_table_ ? window_table_->blocks() : std::span<const BlockId>();
}

void KvCache::give_back_past_window() {
  if (registered_tokens_ != nullptr) table_->commit_full_blocks(*registered_tokens_, 0);
  window_table_->give_back_past_window(table_->blocks());
}

bool KvCache::try_reserve(int64_t length) {
  if (length > max_length_) {
    throw Error(ErrorCode::kInvalidArgument, "sequence of " + std::to_string(length) +
                                                 " tokens exceeds the model's context of " +
                                                 std::to_string(max_length_));
  }
  if (!table_) {
    reserve(length);
    return true;
  }
  if (!window_table_) return table_->reserve(length);
  give_back_past_window();
  // Both tables take their blocks, or neither.
  const int64_t need = table_->blocks_needed(length) + window_table_->blocks_needed(length);
  if (!paged_->blocks().can_allocate(need)) return false;
  const bool reserved = table_->reserve(length) && window_table_->reserve(length);
  check_invariant(reserved, "a pool that can supply both tables' blocks gives them");
  return true;
}

void KvCache::reserve(int64_t length) {
  if (length > max_length_) {
    throw Error(ErrorCode::kInvalidArgument, "sequence of " + std::to_string(length) +
                                                 " tokens exceeds the model's context of " +
                                                 std::to_string(max_length_));
  }
  if (table_) {
    if (!try_reserve(length)) {
      throw Error(ErrorCode::kInternal,
                  "the paged KV cache has no free block for " + std::to_string(length) + " positions");
    }
    return;
  }
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    if (!ring(static_cast<int64_t>(layer)) || keys_[layer].defined()) continue;
    keys_[layer] = backend_.allocate(dtype_, {ring_rows_, kv_heads_, head_dim_});
    values_[layer] = backend_.allocate(dtype_, {ring_rows_, kv_heads_, head_dim_});
  }
  if (length <= capacity_) return;
  int64_t grown = std::min(max_length_, std::max({length, capacity_ * 2, int64_t{64}}));
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    if (ring(static_cast<int64_t>(layer))) continue;
    for (Tensor* slot : {&keys_[layer], &values_[layer]}) {
      Tensor bigger = backend_.allocate(dtype_, {grown, kv_heads_, head_dim_});
      if (length_ > 0) backend_.copy_rows(slot->slice_rows(0, length_), bigger, 0);
      *slot = bigger;
    }
  }
  capacity_ = grown;
}

void KvCache::commit(int64_t count) {
  if (table_) {
    table_->commit(count);
    if (window_table_) window_table_->commit(count);
    return;
  }
  check_invariant(length_ + count <= capacity_, "kv cache commit within capacity");
  length_ += count;
}

void KvCache::truncate(int64_t length) {
  if (recurrent_) recurrent_->truncate(length, this->length());
  if (table_) {
    const std::optional<std::vector<BlockCopy>> copies = table_->truncate(length);
    if (!copies) {
      throw Error(ErrorCode::kInternal, "the paged KV cache has no free block for a shared block's copy");
    }
    for (const BlockCopy& copy : *copies) paged_->copy_block(copy);
    if (window_table_) window_table_->truncate(length);
    return;
  }
  check_invariant(length >= 0 && length <= length_, "kv cache truncates to a shorter length");
  length_ = length;
}

std::span<const BlockId> KvCache::block_ids() const { return table_ ? table_->blocks() : std::span<const BlockId>(); }

PrefixMatch KvCache::adopt_prefix(std::span<const int32_t> tokens) {
  check_invariant(table_ != nullptr, "only a paged cache adopts a cached prefix");
  PrefixMatch match = table_->adopt_prefix(tokens);
  if (recurrent_ && (match.partial_copy || !match.blocks.empty())) {
    // The pool ended the match at a block with a snapshot (BlockPool::require_state_snapshots):
    // a whole tail (whose rows the table copies), or else the last full block.
    const BlockId last = match.partial_copy ? match.partial_copy->from : match.blocks.back();
    const bool restored = paged_->state_snapshots()->restore(last, *recurrent_);
    check_invariant(restored, "a matched block's state snapshot is kept");
  }
  // Each copy as soon as its block is taken: the block it copies is cached again, not yet evicted.
  if (match.partial_copy) paged_->copy_block(*match.partial_copy);
  if (window_table_) {
    if (const std::optional<BlockCopy> copy = window_table_->adopt_prefix(match)) paged_->copy_block(*copy);
  }
  return match;
}

int64_t KvCache::snapshot_boundary(int64_t rows) const {
  if (!recurrent_ || !table_ || registered_tokens_ == nullptr || paged_->state_snapshots() == nullptr) return -1;
  const int64_t block = block_size(), end = length() + rows;
  const int64_t last = end / block * block;
  if (last <= length()) return -1;
  const int64_t interval = std::max(block, kSnapshotInterval / block * block);
  return std::min(last, (length() / interval + 1) * interval);
}

void KvCache::keep_state_snapshot() {
  check_invariant(length() > 0 && length() % block_size() == 0, "a state snapshot is kept at a block boundary");
  paged_->state_snapshots()->keep(table_->blocks()[static_cast<size_t>(length() / block_size() - 1)], *recurrent_);
}

void KvCache::commit_full_blocks(std::span<const int32_t> tokens) {
  if (table_) table_->commit_full_blocks(tokens, 0);
}

std::vector<std::pair<int64_t, BlockId>> KvCache::draft_context_to_write(int64_t drafter_through) const {
  return table_ ? table_->draft_context_to_write(drafter_through) : std::vector<std::pair<int64_t, BlockId>>();
}

void KvCache::commit_draft_context(int64_t drafter_through) {
  if (table_) table_->commit_draft_context(drafter_through);
}

void KvCache::clear_blocks() {
  if (recurrent_) recurrent_->clear();
  if (!table_) return;
  const std::vector<BlockId> owners(table_->blocks().begin(), table_->blocks().end());
  table_->clear();
  // After the full blocks: attached blocks are evicted after the blocks they serve.
  if (window_table_) window_table_->clear(owners);
}

void KvCache::clear_blocks_keeping_tail(std::span<const int32_t> tokens) {
  if (!table_) return;
  keep_final_state_snapshot(table_->register_tail(tokens));
  clear_blocks();
}

void KvCache::keep_final_state_snapshot(std::optional<BlockId> tail) {
  StateSnapshots* snapshots = recurrent_ ? paged_->state_snapshots() : nullptr;
  if (snapshots == nullptr || length() == 0) return;
  check_invariant(recurrent_->kept_rows() < 0, "a recurrent state is settled before it is kept");
  if (tail) {
    snapshots->keep(*tail, *recurrent_);
    return;
  }
  const int64_t full = length() / block_size();
  if (length() % block_size() != 0 || table_->registered_blocks() < full) return;
  const BlockId last = table_->blocks()[static_cast<size_t>(full - 1)];
  if (!paged_->blocks().has_state_snapshot(last)) snapshots->keep(last, *recurrent_);
}

bool KvCache::take_whole(CachePool& pool) {
  check_invariant(length_ == 0, "a kv cache is taken whole before anything is cached");
  check_invariant(!table_, "a paged cache takes blocks, not a whole run");
  const auto layers = static_cast<int64_t>(keys_.size());
  int64_t rows = 0;
  for (int64_t layer = 0; layer < layers; ++layer) rows += 2 * whole_rows(layer);
  std::optional<Tensor> run = pool.try_allocate(dtype_, {rows, kv_heads_, head_dim_});
  if (!run) return false;
  int64_t first = 0;
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (Tensor* slot : {&keys_[layer], &values_[layer]}) {
      *slot = run->slice_rows(first, whole_rows(layer));
      first += whole_rows(layer);
    }
  }
  capacity_ = max_length_;
  return true;
}

void KvCache::release() {
  check_invariant(length_ == 0, "a kv cache is released before anything is cached");
  for (size_t layer = 0; layer < keys_.size(); ++layer) keys_[layer] = values_[layer] = Tensor();
  capacity_ = 0;
}

int64_t KvCache::whole_bytes() const {
  int64_t rows = 0;
  for (int64_t layer = 0; layer < static_cast<int64_t>(keys_.size()); ++layer) rows += whole_rows(layer);
  return static_cast<int64_t>(bytes_per_row()) * rows;
}

}  // namespace flashq
