// One sequence's view of the paged KV cache: the block ids holding its positions, position t in
// block blocks()[t / block_size] at row t % block_size. It takes blocks from the pool as the
// sequence grows (never its maximum up front) and gives whole blocks back on truncation.
//
// Invariant: the block that position length() falls in, and every block after it, is private
// (count 1, unregistered), so the model writes only into blocks no one else sees. Shared blocks
// are full blocks of committed tokens and are never written. The one way a shared block could
// become a tail, truncating into it, copies it first (copy on write): truncate() hands back the
// copy the caller must make of the kept rows before the next write. A sequence's own registered
// tail block is simply taken out of the cache instead.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "worker/model/block_pool.h"

namespace flashq {

class BlockTable {
 public:
  explicit BlockTable(BlockPool& pool) : pool_(pool) {}
  ~BlockTable();  // gives every block back (registered ones stay cached)
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  int64_t length() const { return length_; }
  // Positions the blocks held now can take.
  int64_t capacity() const { return static_cast<int64_t>(blocks_.size()) * pool_.block_size(); }
  std::span<const BlockId> blocks() const { return blocks_; }
  // Leading blocks registered in the prefix cache.
  int64_t registered_blocks() const { return static_cast<int64_t>(hashes_.size()); }

  // Starts an empty table on the longest cached prefix of `tokens` (the sequence's prompt, or
  // its prompt and output when it is resumed): its length becomes the positions found, which
  // the model need not run again. Returns the match (draft_blocks says how much of the drafter's
  // context came with it); the rows of a partial match after the full blocks go into a block of
  // the table's own: `partial_copy` names them, for the caller to copy before the pool
  // allocates again. kInvalidArgument unless the table is empty.
  PrefixMatch adopt_prefix(std::span<const int32_t> tokens);

  // Blocks reserve(length) would take.
  int64_t blocks_needed(int64_t length) const;
  // Takes blocks so positions [0, length) fit. False, and nothing taken, when the pool cannot
  // supply them now (counting cached blocks it may evict).
  [[nodiscard]] bool reserve(int64_t length);
  // Marks `count` more positions as written; kInvalidArgument past capacity().
  void commit(int64_t count);
  // Keeps positions [0, length): blocks past them go back to the pool; a kept tail block that is
  // shared is replaced by a private copy, returned for the caller to fill. kInvalidArgument when
  // `length` is past length(), or nothing when the pool has no block for the copy (nothing
  // changed then; the caller may preempt and retry).
  [[nodiscard]] std::optional<std::vector<BlockCopy>> truncate(int64_t length);

  // Registers the full blocks of [0, length()) not yet registered, holding `tokens` (the
  // sequence's tokens at positions [0, length()), at least). `drafter_through`: the drafter has
  // injected every position this table wrote below it (0 without a drafter); blocks wholly below
  // it are registered with the drafter's context. Where an equal block is cached already the
  // table swaps to it and frees its own (unless only its own holds drafter rows). Stops at a
  // block the cache cannot take (a hash held by other content).
  void commit_full_blocks(std::span<const int32_t> tokens, int64_t drafter_through);
  // Marks the registered blocks this table wrote itself, wholly below `drafter_through`, as
  // holding the drafter's context too, once its lazy injection caught up. Blocks it adopted or
  // swapped in are never marked here: their drafter rows are another writer's.
  void commit_draft_context(int64_t drafter_through);
  // The blocks commit_draft_context(drafter_through) would mark, as (index in the table, block
  // id): the drafter rows their writer must copy into the store first.
  std::vector<std::pair<int64_t, BlockId>> draft_context_to_write(int64_t drafter_through) const;

  // The row of position `position` in a store laid out by block: block * block_size + offset.
  int64_t slot(int64_t position) const;

  // Gives every block back; the table is empty after.
  void clear();
  // Registers the last, partial block in the cache as a tail (BlockPool::register_tail) when its
  // full blocks are registered; `tokens` as for commit_full_blocks. For a sequence that ends or
  // is preempted (clear_keeping_tail), whose tokens are final. Returns the block registered.
  std::optional<BlockId> register_tail(std::span<const int32_t> tokens);
  // register_tail, then clear: the next turn or the resumption of a sequence continues its tokens.
  void clear_keeping_tail(std::span<const int32_t> tokens);

 private:
  BlockPool& pool_;
  std::vector<BlockId> blocks_;
  std::vector<bool> written_;  // per block: this table wrote its rows (reserved or copied)
  int64_t length_ = 0;
  std::vector<uint64_t> hashes_;  // chain hashes of the leading blocks, which are registered
  bool registration_stopped_ = false;
};

}  // namespace flashq
