// One sequence's blocks for the windowed layers of a paged cache (a sliding-window model's, gpt-oss;
// kv_cache.h): position t in block blocks()[t / block_size] at row t % block_size, as in a
// BlockTable, but only the blocks the window can still see are held. Before each pass the blocks
// wholly before the window of the next position are given back (-1 in their place), and blocks
// are taken for one pass at a time (rows_per_pass positions at most), so a sequence holds
// BlockPool::window_blocks_for(length) of them at most, however long it grows.
//
// A block given back whose positions a registered block of the sequence's full-attention table
// holds (its owner: the same index there) is attached to it (BlockPool::attach_window) and stays
// cached with it, so that a later prefix match ending near there restores the windowed layers
// too; adopt_prefix starts a table on such a match.
//
// The table only grows at its end and never truncates into its window's past: what it wrote is
// never shared while it may still write it, so it copies nothing on truncation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "worker/model/block_pool.h"

namespace flashq {

class WindowTable {
 public:
  // The pool's windowed() says the window and the rows of a pass.
  explicit WindowTable(BlockPool& pool);
  ~WindowTable();  // gives every block back (attached ones stay cached)
  WindowTable(const WindowTable&) = delete;
  WindowTable& operator=(const WindowTable&) = delete;

  int64_t length() const { return length_; }
  // Per block of positions [0, capacity): its id, or -1 once given back.
  std::span<const BlockId> blocks() const { return blocks_; }
  int64_t held() const;

  // Starts an empty table on `match` (taken by the sequence's BlockTable::adopt_prefix): its
  // window blocks, and a copy of its partial block's attached rows in a block of its own, which
  // the caller must make before the pool allocates again. kInvalidArgument unless the table is
  // empty.
  std::optional<BlockCopy> adopt_prefix(const PrefixMatch& match);

  // Gives back the blocks wholly before the window of position length(), attaching each to its
  // owner in `owners` (the full-attention table's blocks) when that is registered.
  void give_back_past_window(std::span<const BlockId> owners);
  // Blocks reserve(length) would take.
  int64_t blocks_needed(int64_t length) const;
  // Takes blocks for positions up to min(length, length() + rows_per_pass). False, and nothing
  // taken, when the pool cannot supply them now.
  [[nodiscard]] bool reserve(int64_t length);
  // Marks `count` more positions as written; kInvalidArgument past the blocks taken.
  void commit(int64_t count);
  // Keeps positions [0, length), giving back the blocks past them; kInvalidArgument past
  // length(), kInternal below the window of the positions it has given back.
  void truncate(int64_t length);

  // The row of `position` in a store laid out by block; kInternal for a block given back.
  int64_t slot(int64_t position) const;

  // Gives every block back, attaching those `owners` (as for give_back_past_window) can take.
  void clear(std::span<const BlockId> owners);

 private:
  // The first position the next row attends.
  int64_t window_start() const { return std::max<int64_t>(0, length_ + 1 - pool_.windowed().window); }
  void give_back(size_t index, std::span<const BlockId> owners);

  BlockPool& pool_;
  std::vector<BlockId> blocks_;
  size_t first_held_ = 0;  // blocks before it are given back
  int64_t length_ = 0;
};

}  // namespace flashq
