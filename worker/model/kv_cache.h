// The key/value cache of one sequence: per layer, keys and values of the positions run so far,
// [rows, kv_heads, head_dim] float32 or bf16 (kv_cache_dtype.h) on the backend's device. Positions [0, length) are valid.
// Truncation only moves the length back (rejected draft tokens are simply overwritten).
//
// A layer that attends only the last W positions (a sliding-window layer, gpt-oss) keeps only
// them: its rows are a ring of W + kMaxRowsPerPass, position t at row t % rows (ring_row), so a
// pass that stores up to kMaxRowsPerPass positions and is later truncated never overwrote a key
// still attended. Every other layer keeps every position, growing up to max_length.
//
// A paged cache (made over a PagedKvStore) keeps its positions in blocks of the store's pool
// instead, listed by its BlockTable: it takes blocks as the sequence grows, gives whole blocks
// back on truncation, and may start on a cached prefix (adopt_prefix). Its layers' keys and
// values are the store's, shared by every sequence; a row of position t is slot(t). Windowed
// layers, when the model has them, keep theirs in blocks of the same pool listed by a
// WindowTable (window_table.h), which holds only the window's: a row of position t there is
// window_slot(t). The store's layers are slots: the full-attention layers in order take slots
// 0, 1, ..., and the windowed layers in order take slots 0, 1, ... of the blocks their table lists.
//
// A hybrid model's cache (Qwen3.5, Qwen3-Next) holds its attention layers only (the model's layer
// i is the cache's layer attention_layers(config)[i]'s index) and, beside them, the recurrent
// state of its linear-attention layers (recurrent_state.h), which truncation and clearing keep in
// step with the positions. Paged, it adopts a cached prefix only up to a block whose state
// snapshot the store keeps (state_snapshots.h), and starts from that state.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/block_table.h"
#include "worker/model/cache_pool.h"
#include "worker/model/paged_kv_store.h"
#include "worker/model/recurrent_state.h"
#include "worker/model/window_table.h"

namespace flashq {

class KvCache {
 public:
  // The most positions of one sequence a forward pass may store into a windowed layer, a ring's
  // or a paged one's (the decoder model runs longer chunks in parts).
  static constexpr int64_t kMaxRowsPerPass = 256;

  // `windows`: per layer, 0 (every position) or the window W it attends; empty: none windowed.
  // `dtype`: the keys' and values' element type, kF32 or kBF16.
  KvCache(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t max_length,
          std::vector<int64_t> windows = {}, DType dtype = DType::kF32);
  // A paged cache over `store`, empty; `windows` as above (the store's pool has their window).
  KvCache(PagedKvStore& store, int64_t max_length, std::vector<int64_t> windows = {});

  int64_t length() const { return table_ ? table_->length() : length_; }
  // Of the layers that keep every position; a paged cache's blocks held now.
  int64_t capacity() const { return table_ ? table_->capacity() : capacity_; }
  int64_t max_length() const { return max_length_; }
  // Rows of a windowed layer's ring (0 when no layer is windowed); the cache row of position t
  // there is t % ring_rows().
  int64_t ring_rows() const { return ring_rows_; }
  bool ring(int64_t layer) const { return !table_ && windowed(layer); }
  // Whether layer `layer` attends a window, and whether any does.
  bool windowed(int64_t layer) const { return !windows_.empty() && windows_[static_cast<size_t>(layer)] > 0; }
  bool windowed() const { return ring_rows_ > 0 || window_table_ != nullptr; }
  // The row of position t in a windowed layer's keys: t % ring_rows(), or its slot through the
  // window table when paged.
  int64_t window_slot(int64_t position) const;

  // Makes room for `length` positions, growing geometrically (copying what is there).
  // kInvalidArgument when `length` exceeds max_length; for a paged cache whose pool has no
  // blocks for it now, kInternal (the engine reserves with try_reserve first).
  void reserve(int64_t length);
  // reserve() that says false, and takes nothing, when a paged cache's pool cannot supply the
  // blocks now (counting cached blocks it may evict).
  [[nodiscard]] bool try_reserve(int64_t length);
  // Takes room for max_length positions of every layer at once (a ring layer's ring), in one run
  // of `pool` (nothing is allocated after); only while nothing is cached. False, and nothing
  // changed, when no run of the pool is long enough now.
  bool take_whole(CachePool& pool);
  // The bytes take_whole needs.
  int64_t whole_bytes() const;
  // Gives the memory back (to its pool, if it came from one); only while nothing is cached.
  void release();
  // Marks `count` more positions as written (the model wrote their rows at [length, length+count)).
  void commit(int64_t count);
  // Keeps positions [0, length). A paged cache gives the blocks past them back, and copies a kept
  // tail block that is shared (kInternal when no block is left for the copy: the engine never
  // truncates below its committed blocks).
  void truncate(int64_t length);

  Tensor& keys(int64_t layer) { return paged_ ? paged_->keys(store_slot(layer)) : keys_[layer]; }
  Tensor& values(int64_t layer) { return paged_ ? paged_->values(store_slot(layer)) : values_[layer]; }

  // What tells this cache's memory apart from other caches' (a recorded pass's key): its table
  // when paged (the store is shared), else its keys, all layers being allocated together.
  const void* identity() const { return table_ ? static_cast<const void*>(table_.get()) : keys_[0].raw(); }

  // ---- paged caches ----
  bool paged() const { return paged_ != nullptr; }
  int64_t block_size() const { return paged_ ? paged_->block_size() : 0; }
  // The block ids of positions [0, capacity()); empty when not paged.
  std::span<const BlockId> block_ids() const;
  // The windowed layers' (WindowTable::blocks: -1 where given back); empty when not paged or none.
  std::span<const BlockId> window_block_ids() const;
  // Blocks of the pool this cache holds now, of both kinds.
  int64_t held_blocks() const;
  // Registers full blocks as the cache fills, from `tokens` (the sequence's, holding every
  // position written: they outlive the cache's use of them), before windowed blocks are given
  // back, so that those given back mid-prompt are attached and kept (prefix caching).
  void register_as_written(const std::vector<int32_t>* tokens) { registered_tokens_ = tokens; }
  // The row of position t in the store (t itself when not paged: its own tensors).
  int64_t slot(int64_t position) const { return table_ ? table_->slot(position) : position; }
  // Starts an empty paged cache on the longest cached prefix of `tokens` (BlockTable::adopt_prefix),
  // a partial match's rows copied into its own block.
  PrefixMatch adopt_prefix(std::span<const int32_t> tokens);
  // Registers the full blocks of committed positions in the prefix cache; `tokens` holds the
  // sequence's tokens at positions [0, length()) at least (BlockTable::commit_full_blocks).
  void commit_full_blocks(std::span<const int32_t> tokens);
  // Registered blocks this cache wrote, wholly below `drafter_through`, whose drafter context rows
  // the store lacks (BlockTable::draft_context_to_write), and marking them once copied.
  std::vector<std::pair<int64_t, BlockId>> draft_context_to_write(int64_t drafter_through) const;
  void commit_draft_context(int64_t drafter_through);
  PagedKvStore* paged_store() const { return paged_; }
  // Leading blocks registered in the prefix cache (0 when not paged).
  int64_t registered_blocks() const { return table_ ? table_->registered_blocks() : 0; }
  // Gives every block back; the cache is empty after (a preempted sequence's).
  void clear_blocks();
  // The same, keeping the last partial block cached as a tail (BlockTable::clear_keeping_tail)
  // and, for a hybrid model, the recurrent state after the last position as the snapshot of the
  // block that ends there (the tail, or the last full block): a conversation's next turn, or the
  // sequence resumed, starts from it. The state must be settled (TargetModel::settle_recurrent_state).
  void clear_blocks_keeping_tail(std::span<const int32_t> tokens);

  // ---- a hybrid model's recurrent state ----
  void attach_recurrent_state(std::unique_ptr<RecurrentState> state) { recurrent_ = std::move(state); }
  // Null when the model has no linear-attention layers.
  RecurrentState* recurrent() const { return recurrent_.get(); }
  // Where a prefill of `rows` rows from here keeps its next state snapshot, when this cache keeps
  // them (paged, recurrent, its store keeping them, registering its blocks), else -1: the first
  // in (length, length + rows] of every kSnapshotInterval-th position (rounded to whole blocks:
  // a shared system prompt's state is kept within it) and the last block boundary (where the
  // next turn of a conversation finds it).
  int64_t snapshot_boundary(int64_t rows) const;
  static constexpr int64_t kSnapshotInterval = 512;
  // Keeps the state now as the snapshot of the block ending at length() (a block boundary).
  void keep_state_snapshot();

 private:
  // Rows layer `layer` holds once whole: max_length, or its ring.
  int64_t whole_rows(int64_t layer) const { return ring(layer) ? ring_rows_ : max_length_; }
  size_t bytes_per_row() const { return 2 * static_cast<size_t>(kv_heads_ * head_dim_) * dtype_size(dtype_); }
  int64_t store_slot(int64_t layer) const { return store_slots_[static_cast<size_t>(layer)]; }
  // A paged cache with windowed layers: gives back the window's past (registering first).
  void give_back_past_window();
  // Keeps the recurrent state as the snapshot of `tail` (registered just now), or else of the
  // last full block when the sequence ends at its boundary; nothing without snapshots.
  void keep_final_state_snapshot(std::optional<BlockId> tail);

  Backend& backend_;
  int64_t kv_heads_, head_dim_, max_length_;
  std::vector<int64_t> windows_;
  DType dtype_ = DType::kF32;
  int64_t ring_rows_ = 0;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  std::vector<Tensor> keys_, values_;
  PagedKvStore* paged_ = nullptr;
  std::unique_ptr<BlockTable> table_;  // a paged cache's
  std::unique_ptr<WindowTable> window_table_;  // a paged cache's with windowed layers
  std::vector<int64_t> store_slots_;  // a paged cache's: per layer, its slot in the store
  const std::vector<int32_t>* registered_tokens_ = nullptr;
  std::unique_ptr<RecurrentState> recurrent_;
};

}  // namespace flashq
