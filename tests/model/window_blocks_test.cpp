// The blocks of windowed layers (a sliding-window model's, gpt-oss) in a paged cache: blocks
// attached to the registered blocks whose positions they hold and cached with them
// (BlockPool::attach_window), prefix matches that end only where the window before them is
// attached, and a sequence's WindowTable (worker/model/window_table.h), which holds only the
// blocks its window still sees. Blocks of 4 positions, a window of 6, passes of 4 rows at most.
#include "worker/model/window_table.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "shared/error.h"
#include "tests/support/expect_error.h"
#include "worker/model/block_pool.h"
#include "worker/model/block_table.h"

namespace flashq {
namespace {

constexpr int64_t kBlock = 4;
constexpr WindowedLayers kWindowed{.window = 6, .rows_per_pass = 4};

std::vector<int32_t> iota_tokens(size_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A sequence as a KvCache pairs them: a full-attention table and a window table over one pool,
// written `length` positions of `tokens` pass by pass (4 rows at most), registering full blocks.
struct Sequence {
  BlockTable full;
  WindowTable window;
  explicit Sequence(BlockPool& pool) : full(pool), window(pool) {}

  void write(std::span<const int32_t> tokens, int64_t length) {
    while (full.length() < length) {
      const int64_t n = std::min<int64_t>(4, length - full.length());
      full.commit_full_blocks(tokens, 0);
      window.give_back_past_window(full.blocks());
      ASSERT_TRUE(full.reserve(full.length() + n));
      ASSERT_TRUE(window.reserve(full.length() + n));
      full.commit(n);
      window.commit(n);
    }
    full.commit_full_blocks(tokens, 0);
  }
  // What a finished sequence does (KvCache::clear_blocks_keeping_tail).
  void finish(std::span<const int32_t> tokens) {
    full.register_tail(tokens);
    const std::vector<BlockId> owners(full.blocks().begin(), full.blocks().end());
    full.clear();
    window.clear(owners);
  }
};

TEST(WindowBlocks, ASequenceHoldsTheWindowOfItsNextPassAtMost) {
  const BlockPool pool(64, kBlock, kWindowed);
  // Positions [L + 1 - 6, L + 4) before a pass: 9 positions, 4 blocks when not block-aligned.
  EXPECT_EQ(pool.window_blocks_for(5), 2);
  EXPECT_EQ(pool.window_blocks_for(100), 4);
  EXPECT_EQ(pool.blocks_to_hold(100), 25 + 4);
  EXPECT_EQ(BlockPool(64, kBlock).window_blocks_for(100), 0) << "no windowed layers";
  expect_code(ErrorCode::kInvalidArgument, [] { BlockPool(4, kBlock, {.window = -1}); });
}

TEST(WindowBlocks, AnAttachedBlockIsCachedWithItsOwnerAndGoesWithIt) {
  BlockPool pool(4, kBlock, kWindowed);
  const std::vector<int32_t> tokens = iota_tokens(kBlock, 1);
  const BlockId owner = pool.allocate().value(), window = pool.allocate().value();
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.attach_window(owner, window); });  // not registered yet
  ASSERT_EQ(pool.register_block(owner, std::nullopt, BlockPool::kRootHash, tokens, false), owner);
  EXPECT_TRUE(pool.attach_window(owner, window));
  EXPECT_EQ(pool.window_of(owner), window);
  EXPECT_TRUE(pool.attached(window));
  const BlockId other = pool.allocate().value();
  EXPECT_FALSE(pool.attach_window(owner, other)) << "the owner has one";
  pool.release(other);
  pool.release(window);
  pool.release(owner);
  EXPECT_EQ(pool.stats().cached, 2);
  EXPECT_EQ(pool.stats().free, 2);

  // The pool's free blocks go first, then the least recently released: the attached block
  // alone (the owner keeps its rows, with none attached), then the owner.
  for (int i = 0; i < 2; ++i) pool.allocate();
  EXPECT_EQ(pool.allocate(), window);
  EXPECT_FALSE(pool.window_of(owner).has_value());
  EXPECT_TRUE(pool.registered(owner));
}

TEST(WindowBlocks, EvictingOrUnregisteringTheOwnerFreesItsAttachedBlock) {
  BlockPool pool(3, kBlock, kWindowed);
  const std::vector<int32_t> tokens = iota_tokens(kBlock, 1);
  const BlockId owner = pool.allocate().value(), window = pool.allocate().value();
  ASSERT_EQ(pool.register_block(owner, std::nullopt, BlockPool::kRootHash, tokens, false), owner);
  ASSERT_TRUE(pool.attach_window(owner, window));
  pool.release(owner);  // released first: evicted first
  pool.release(window);
  pool.allocate();  // the free one
  EXPECT_EQ(pool.allocate(), owner) << "the owner evicted";
  EXPECT_EQ(pool.stats().free, 1) << "its attached block freed with it";
  EXPECT_FALSE(pool.attached(window));

  // A held owner taken out of the cache (its tail about to be rewritten) lets its block go too.
  BlockPool second(2, kBlock, kWindowed);
  const BlockId tail = second.allocate().value(), rows = second.allocate().value();
  ASSERT_TRUE(second.register_tail(tail, std::nullopt, BlockPool::kRootHash, std::vector<int32_t>{7, 8}));
  ASSERT_TRUE(second.attach_window(tail, rows));
  second.release(rows);
  EXPECT_EQ(second.stats().cached, 1);
  second.unregister(tail);
  EXPECT_EQ(second.stats().free, 1);
}

// A finished sequence's blocks are all attached, from those given back as it ran to those of
// its last window: a match of its tokens ends where it ended, with the window's blocks (those
// that position 21's window, [16, 21], reaches) and not those before.
TEST(WindowBlocks, AMatchOfAFinishedSequenceTakesTheBlocksOfItsLastWindow) {
  BlockPool pool(32, kBlock, kWindowed);
  const std::vector<int32_t> tokens = iota_tokens(22, 1);
  {
    Sequence writer(pool);
    writer.write(tokens, 21);
    writer.finish(tokens);
  }
  const PrefixMatch match = pool.peek_prefix(tokens);
  ASSERT_EQ(match.positions(kBlock), 21);
  ASSERT_EQ(match.blocks.size(), 5u);
  EXPECT_EQ(match.window_blocks, (std::vector<BlockId>{-1, -1, -1, -1, *pool.window_of(match.blocks[4])}));
  ASSERT_TRUE(match.window_partial.has_value());
  EXPECT_EQ(match.window_partial, pool.window_of(*match.partial));
  EXPECT_EQ(match.evictable, 5 + 1) << "the blocks and the window's attached one";
  for (BlockId id : match.blocks) EXPECT_TRUE(pool.window_of(id).has_value()) << "attached as the writer ran";
}

// Blocks 0 to 4 registered, with blocks attached to all but block 2: a match ends where the
// window before its end (from end - 5) is attached, so 20 positions match (blocks 3 and 4
// seen), and of 16 tokens only 8 (12 would need block 2's).
TEST(WindowBlocks, AMatchEndsWhereItsWindowIsAttached) {
  BlockPool pool(16, kBlock, kWindowed);
  const std::vector<int32_t> tokens = iota_tokens(21, 1);
  std::vector<BlockId> owners;
  uint64_t parent_hash = BlockPool::kRootHash;
  for (size_t i = 0; i < 5; ++i) {
    const BlockId id = pool.allocate().value();
    const auto part = std::span<const int32_t>(tokens).subspan(i * kBlock, kBlock);
    const std::optional<BlockId> parent = i == 0 ? std::nullopt : std::optional<BlockId>(owners.back());
    ASSERT_EQ(pool.register_block(id, parent, parent_hash, part, false), id);
    parent_hash = BlockPool::chain_hash(parent_hash, part);
    owners.push_back(id);
  }
  for (size_t i : {0, 1, 3, 4}) {
    const BlockId rows = pool.allocate().value();
    ASSERT_TRUE(pool.attach_window(owners[i], rows));
    pool.release(rows);
  }
  for (BlockId id : owners) pool.release(id);
  const PrefixMatch whole = pool.peek_prefix(tokens);
  EXPECT_EQ(whole.positions(kBlock), 20);
  EXPECT_EQ(whole.window_blocks[2], -1);
  EXPECT_EQ(whole.window_blocks[3], *pool.window_of(owners[3]));
  const PrefixMatch cut = pool.peek_prefix(std::span<const int32_t>(tokens.data(), 17));
  EXPECT_EQ(cut.positions(kBlock), 8);
  EXPECT_EQ(cut.blocks, (std::vector<BlockId>{owners[0], owners[1]}));
  EXPECT_EQ(cut.hashes.size(), 2u);
  EXPECT_EQ(cut.evictable, 4);
}

TEST(WindowBlocks, AWindowTableGivesBackWhatItsWindowNoLongerSeesAndAttachesIt) {
  BlockPool pool(32, kBlock, kWindowed);
  const std::vector<int32_t> tokens = iota_tokens(40, 1);
  Sequence s(pool);
  s.write(tokens, 24);
  // Before the next pass at 24 the window starts at 19: blocks 0 to 3 given back.
  s.window.give_back_past_window(s.full.blocks());
  EXPECT_EQ(s.window.held(), 2);
  EXPECT_EQ(s.window.blocks()[3], -1);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(pool.window_of(s.full.blocks()[static_cast<size_t>(i)]).has_value()) << "block " << i;
  }
  expect_code(ErrorCode::kInternal, [&] { s.window.slot(15); });
  EXPECT_EQ(s.window.slot(21), s.window.blocks()[5] * kBlock + 1);
  // One pass at a time: 4 rows.
  EXPECT_EQ(s.window.blocks_needed(40), 1);
  expect_code(ErrorCode::kInvalidArgument, [&] { s.window.commit(5); });
  // Truncation within the window is fine; before it, a bug.
  ASSERT_TRUE(s.window.reserve(28));
  s.window.commit(4);
  s.window.truncate(25);
  EXPECT_EQ(s.window.held(), 3);
  expect_code(ErrorCode::kInternal, [&] { s.window.truncate(10); });
}

// A table started on a match holds the window's blocks of it, and a copy of the partial block's
// attached rows in a block of its own.
TEST(WindowBlocks, AdoptingAMatchTakesItsWindowAndCopiesItsPartialRows) {
  BlockPool pool(32, kBlock, kWindowed);
  const std::vector<int32_t> tokens = iota_tokens(22, 1);
  {
    Sequence writer(pool);
    writer.write(tokens, 21);
    writer.finish(tokens);
  }
  Sequence reader(pool);
  const PrefixMatch match = reader.full.adopt_prefix(tokens);
  const BlockId partial_rows = *match.window_partial;
  const std::optional<BlockCopy> copy = reader.window.adopt_prefix(match);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->from, partial_rows);
  EXPECT_EQ(copy->rows, 1);
  EXPECT_EQ(reader.window.length(), 21);
  EXPECT_EQ(reader.window.held(), 2) << "block 4's attached block and the copy";
  EXPECT_EQ(reader.window.blocks()[5], copy->to);
  EXPECT_EQ(pool.ref_count(match.window_blocks[4]), 1);
  expect_code(ErrorCode::kInvalidArgument, [&] { reader.window.adopt_prefix(match); });
}

}  // namespace
}  // namespace flashq
