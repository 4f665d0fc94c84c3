// The memory of a paged KV cache: per layer slot, one store of keys and one of values holding N
// blocks of B positions each ([N * B, kv_heads, head_dim] float32 or bf16, block b at rows
// [b * B, (b + 1) * B)), shared by every sequence, and the BlockPool that hands the blocks out
// (block_pool.h). A sequence's KvCache (kv_cache.h) holds a BlockTable over it; attention reads
// each sequence's keys through its table (kernels/backend.h, AttentionOptions::block_table).
//
// A model with windowed layers (gpt-oss: sliding-window layers between full-attention ones) has
// max(full, windowed) slots: a block holds either its full-attention layers' rows of B positions
// (listed by a sequence's BlockTable) or its windowed layers' (listed by its WindowTable), so
// both kinds share one pool and one block size in bytes, and a sequence holds the windowed
// layers' blocks of its window only.
//
// With a DFlash drafter the store also keeps, per block, the drafter's context rows of the same
// positions (its injected keys and values, DraftContextShape), so that a cached prefix costs the
// drafter nothing either: a sequence copies its rows into a registered block once its drafter
// has injected them (BlockPool::mark_draft_context), and a sequence that adopts the block copies
// them into its own draft context (worker/engine/dflash_proposer.h).
//
// All the stores are one allocation: from the worker's CachePool when it has one (sized once,
// nothing allocated in the decode loop), else from the backend.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/block_pool.h"
#include "worker/model/block_table.h"
#include "worker/model/cache_pool.h"
#include "worker/model/state_snapshots.h"

namespace flashq {

// The layers of keys and values a store keeps per position.
struct KvShape {
  int64_t layers = 0, kv_heads = 0, head_dim = 0;
};

class PagedKvStore {
 public:
  // The bytes one block takes over all layers (keys and values) of `dtype` elements.
  static int64_t bytes_per_block(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t block_size,
                                 DType dtype = DType::kF32);

  // kInvalidArgument unless blocks and block_size are positive, or when `pool` (null: allocated
  // from the backend) has no run long enough for the stores. `layers`: slots, as above.
  // `draft_context`: the drafter's context rows kept beside the target's (none: layers 0).
  // `dtype`: every store's elements (kF32 or kBF16), the drafter's rows included. `windowed`:
  // the windowed layers' window, for the pool.
  PagedKvStore(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t blocks, int64_t block_size,
               CachePool* pool = nullptr, KvShape draft_context = {}, DType dtype = DType::kF32,
               WindowedLayers windowed = {});
  PagedKvStore(const PagedKvStore&) = delete;
  PagedKvStore& operator=(const PagedKvStore&) = delete;

  Backend& backend() const { return backend_; }
  BlockPool& blocks() { return blocks_; }
  const BlockPool& blocks() const { return blocks_; }
  int64_t block_size() const { return blocks_.block_size(); }
  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }

  // The bytes of its stores, and of the blocks sequences hold now.
  int64_t memory_bytes() const { return static_cast<int64_t>(memory_.nbytes()); }
  int64_t used_bytes() const { return blocks_.stats().used * (memory_bytes() / blocks_.blocks()); }

  Tensor& keys(int64_t layer) { return keys_[static_cast<size_t>(layer)]; }
  Tensor& values(int64_t layer) { return values_[static_cast<size_t>(layer)]; }

  // The drafter's context rows, [blocks * block_size, kv_heads, head_dim] per drafter layer.
  bool holds_draft_context() const { return !draft_keys_.empty(); }
  Tensor& draft_keys(int64_t layer) { return draft_keys_[static_cast<size_t>(layer)]; }
  Tensor& draft_values(int64_t layer) { return draft_values_[static_cast<size_t>(layer)]; }

  // Rows [0, copy.rows) of block copy.from written to block copy.to, in every slot's keys and
  // values and the drafter's rows (a shared block's copy on write, BlockTable::truncate; a
  // partial prefix match's rows).
  void copy_block(const BlockCopy& copy);

  // A hybrid model's store also keeps recurrent-state snapshots at block boundaries
  // (state_snapshots.h), room for `capacity`; matches then end at blocks that have one.
  void keep_state_snapshots(const LinearAttentionConfig& shape, int64_t linear_layers, int64_t capacity);
  StateSnapshots* state_snapshots() { return snapshots_.get(); }

 private:
  Backend& backend_;
  BlockPool blocks_;
  Tensor memory_;  // every layer's stores, one after another
  std::vector<Tensor> keys_, values_;
  std::vector<Tensor> draft_keys_, draft_values_;
  std::unique_ptr<StateSnapshots> snapshots_;
};

}  // namespace flashq
