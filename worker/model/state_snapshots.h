// Prefix caching for a hybrid model (Qwen3.5, Qwen3-Next): the recurrent state of its Gated
// DeltaNet layers after a block's last position, kept beside the paged KV store, so that a later
// sequence whose prompt starts with that prefix starts from the cached blocks and this state
// instead of from zero. The pool (BlockPool::require_state_snapshots) ends every match at a block
// with a snapshot, or at a tail it takes whole whose snapshot is kept. A prefill keeps one at
// every 512th position it passes and at the last block boundary of its prompt (the model ends a
// pass at each: KvCache::snapshot_boundary), where a prompt sharing a system prompt finds one; a
// sequence that ends or is preempted keeps one after its last position (with its tail, or its
// last full block), where a conversation's next turn or the sequence's rerun finds it. A fixed
// number of snapshots, the least recently kept or used given up first (its block's mark cleared,
// so matches end earlier). docs/decisions.md, "Prefix caching over recurrent state".
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/block_pool.h"
#include "worker/model/recurrent_state.h"

namespace flashq {

class StateSnapshots {
 public:
  // Room for `capacity` snapshots of `linear_layers` layers of `shape`, allocated as they are kept.
  StateSnapshots(Backend& backend, const LinearAttentionConfig& shape, int64_t linear_layers, int64_t capacity,
                 BlockPool& pool);

  // Keeps `state` as the state after block `id`'s last position (marked in the pool).
  void keep(BlockId id, const RecurrentState& state);
  // Copies block `id`'s snapshot into `state`: false when none is kept for its content now.
  bool restore(BlockId id, RecurrentState& state);

  int64_t capacity() const { return capacity_; }
  int64_t kept() const { return static_cast<int64_t>(slots_.size()); }

 private:
  struct Slot {
    BlockId block = -1;
    uint32_t generation = 0;
    std::unique_ptr<RecurrentState> state;
  };
  // A slot for a new snapshot: a new one while under capacity, else the least recently used.
  std::list<Slot>::iterator take_slot();

  Backend& backend_;
  LinearAttentionConfig shape_;
  int64_t linear_layers_, capacity_;
  BlockPool& pool_;
  std::list<Slot> slots_;  // least recently kept or used first
  std::unordered_map<BlockId, std::list<Slot>::iterator> by_block_;
};

}  // namespace flashq
