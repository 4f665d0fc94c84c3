// The block pool of the paged KV cache (worker/model/block_pool.h): reference counts, the free
// list, registration of full blocks under chain hashes and of tails, matches to the token,
// least-recently-used eviction of cached blocks, and typed errors for misuse.
#include "worker/model/block_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "shared/error.h"
#include "tests/support/expect_error.h"

namespace flashq {
namespace {

constexpr int64_t kBlock = 4;

std::vector<int32_t> iota_tokens(size_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Registers `ids` as the successive full blocks of `tokens`; returns their chain hashes.
std::vector<uint64_t> register_chain(BlockPool& pool, const std::vector<BlockId>& ids, std::span<const int32_t> tokens,
                                     bool draft_context = false) {
  std::vector<uint64_t> hashes;
  uint64_t parent_hash = BlockPool::kRootHash;
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto part = tokens.subspan(i * kBlock, kBlock);
    const std::optional<BlockId> parent = i == 0 ? std::nullopt : std::optional<BlockId>(ids[i - 1]);
    EXPECT_EQ(pool.register_block(ids[i], parent, parent_hash, part, draft_context), ids[i]);
    parent_hash = BlockPool::chain_hash(parent_hash, part);
    hashes.push_back(parent_hash);
  }
  return hashes;
}

// A cached full block of tokens[0, kBlock) and a cached tail of the next `tail_tokens` after it,
// the tail released first (so evicted first).
std::pair<BlockId, BlockId> cache_block_and_tail(BlockPool& pool, std::span<const int32_t> tokens, size_t tail_tokens) {
  const BlockId full = pool.allocate().value(), tail = pool.allocate().value();
  const std::vector<uint64_t> hashes = register_chain(pool, {full}, tokens);
  EXPECT_TRUE(pool.register_tail(tail, full, hashes[0], tokens.subspan(kBlock, tail_tokens)));
  pool.release(tail);
  pool.release(full);
  return {full, tail};
}

TEST(BlockPoolTest, RejectsEmptyPoolsAndBlocks) {
  expect_code(ErrorCode::kInvalidArgument, [] { BlockPool(0, 16); });
  expect_code(ErrorCode::kInvalidArgument, [] { BlockPool(8, 0); });
}

TEST(BlockPoolTest, AllocatesEveryBlockOnceThenNothing) {
  BlockPool pool(3, kBlock);
  std::vector<BlockId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(pool.allocate().value());
  EXPECT_EQ(std::set<BlockId>(ids.begin(), ids.end()).size(), 3U);
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_FALSE(pool.can_allocate(1));
  EXPECT_EQ(pool.stats().used, 3);
  EXPECT_EQ(pool.stats().free, 0);
  pool.release(ids[1]);
  EXPECT_TRUE(pool.can_allocate(1));
  EXPECT_EQ(pool.allocate(), ids[1]);
}

TEST(BlockPoolTest, ReferenceCountsFollowRetainAndRelease) {
  BlockPool pool(2, kBlock);
  const BlockId id = pool.allocate().value();
  EXPECT_EQ(pool.ref_count(id), 1);
  pool.retain(id);
  EXPECT_EQ(pool.ref_count(id), 2);
  pool.release(id);
  EXPECT_EQ(pool.ref_count(id), 1);
  EXPECT_EQ(pool.stats().free, 1);
  pool.release(id);  // unregistered: free again, not cached
  EXPECT_EQ(pool.ref_count(id), 0);
  EXPECT_EQ(pool.stats().free, 2);
  EXPECT_EQ(pool.stats().cached, 0);
}

TEST(BlockPoolTest, MisuseIsATypedErrorAndChangesNothing) {
  BlockPool pool(2, kBlock);
  const BlockId id = pool.allocate().value();
  const BlockId other = pool.allocate().value();
  pool.release(other);
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.release(other); });  // a free block
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.retain(other); });
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.release(7); });  // outside the pool
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.ref_count(-1); });
  const std::vector<int32_t> short_block = {1, 2};
  expect_code(ErrorCode::kInvalidArgument,
              [&] { pool.register_block(id, std::nullopt, BlockPool::kRootHash, short_block, false); });
  const std::vector<int32_t> tokens = iota_tokens(kBlock, 0);
  expect_code(ErrorCode::kInvalidArgument,
              [&] { pool.register_block(other, std::nullopt, BlockPool::kRootHash, tokens, false); });  // free
  pool.retain(id);
  expect_code(ErrorCode::kInvalidArgument,
              [&] { pool.register_block(id, std::nullopt, BlockPool::kRootHash, tokens, false); });  // shared
  pool.release(id);
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.register_block(id, id, 42, tokens, false); });  // parent unregistered
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.register_block(id, std::nullopt, 42, tokens, false); });
  ASSERT_EQ(pool.register_block(id, std::nullopt, BlockPool::kRootHash, tokens, false), id);
  expect_code(ErrorCode::kInvalidArgument,
              [&] { pool.register_block(id, std::nullopt, BlockPool::kRootHash, tokens, false); });  // twice
  pool.retain(id);
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.unregister(id); });  // shared: copy first
  EXPECT_EQ(pool.ref_count(id), 2);
  EXPECT_TRUE(pool.registered(id));
  EXPECT_EQ(pool.stats().used, 1);
  EXPECT_EQ(pool.stats().free, 1);
}

TEST(BlockPoolTest, RegisteredBlocksStayCachedAndMatchWithoutTheLastToken) {
  BlockPool pool(4, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock + 1, 100);
  const std::vector<BlockId> ids = {pool.allocate().value(), pool.allocate().value()};
  register_chain(pool, ids, tokens);
  pool.release(ids[1]);
  pool.release(ids[0]);
  EXPECT_EQ(pool.stats().cached, 2);
  EXPECT_EQ(pool.stats().free, 2);
  EXPECT_TRUE(pool.can_allocate(4));  // cached blocks are evictable

  PrefixMatch peek = pool.peek_prefix(tokens);
  EXPECT_EQ(peek.blocks, ids);
  EXPECT_EQ(peek.evictable, 2);
  EXPECT_EQ(pool.stats().lookup_tokens, 0);

  // With exactly two blocks of tokens the last one must still run: one block matches.
  const std::span<const int32_t> two_blocks(tokens.data(), 2 * kBlock);
  EXPECT_EQ(pool.peek_prefix(two_blocks).blocks, std::vector<BlockId>{ids[0]});

  PrefixMatch match = pool.match_prefix(tokens);
  EXPECT_EQ(match.blocks, ids);
  EXPECT_EQ(pool.ref_count(ids[0]), 1);
  EXPECT_EQ(pool.ref_count(ids[1]), 1);
  EXPECT_EQ(pool.stats().cached, 0);
  EXPECT_EQ(pool.stats().lookup_tokens, 2 * kBlock + 1);
  EXPECT_EQ(pool.stats().hit_tokens, 2 * kBlock);
}

TEST(BlockPoolTest, SameTokensUnderAnotherPrefixAreAnotherBlock) {
  BlockPool pool(4, kBlock);
  std::vector<int32_t> first = iota_tokens(2 * kBlock + 1, 0);
  std::vector<int32_t> second = first;
  second[0] = 999;  // the second block's tokens are the same, its prefix is not
  const std::vector<BlockId> ids = {pool.allocate().value(), pool.allocate().value()};
  const std::vector<uint64_t> hashes = register_chain(pool, ids, first);
  EXPECT_NE(BlockPool::chain_hash(BlockPool::chain_hash(BlockPool::kRootHash, std::span(second).first(kBlock)),
                                  std::span(second).subspan(kBlock, kBlock)),
            hashes[1]);
  EXPECT_TRUE(pool.peek_prefix(second).blocks.empty());
  // Nor does a block match when asked for at the start of a sequence.
  const std::vector<int32_t> second_block_first(first.begin() + kBlock, first.end());
  EXPECT_TRUE(pool.peek_prefix(second_block_first).blocks.empty());
}

TEST(BlockPoolTest, EvictsTheLeastRecentlyReleasedCachedBlockFirst) {
  BlockPool pool(3, kBlock);
  const std::vector<int32_t> a = iota_tokens(kBlock + 1, 0), b = iota_tokens(kBlock + 1, 10),
                             c = iota_tokens(kBlock + 1, 20);
  const BlockId ia = pool.allocate().value(), ib = pool.allocate().value(), ic = pool.allocate().value();
  register_chain(pool, {ia}, a);
  register_chain(pool, {ib}, b);
  register_chain(pool, {ic}, c);
  pool.release(ib);
  pool.release(ia);
  pool.release(ic);  // LRU order: b, a, c
  EXPECT_EQ(pool.stats().cached, 3);
  // A hit on b makes it referenced, then recent when released again: order a, c, b.
  pool.match_prefix(b);
  pool.release(ib);

  EXPECT_EQ(pool.allocate(), ia);
  EXPECT_FALSE(pool.registered(ia));
  EXPECT_TRUE(pool.peek_prefix(a).blocks.empty());
  EXPECT_EQ(pool.stats().evictions, 1);
  EXPECT_EQ(pool.allocate(), ic);
  EXPECT_EQ(pool.peek_prefix(b).blocks, std::vector<BlockId>{ib});
  EXPECT_EQ(pool.allocate(), ib);
  EXPECT_EQ(pool.stats().evictions, 3);
  EXPECT_FALSE(pool.allocate().has_value());
}

TEST(BlockPoolTest, AnEvictedParentOrphansItsChildrenEvenWhenItsIdComesBack) {
  BlockPool pool(2, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock + 1, 0);
  const std::vector<BlockId> ids = {pool.allocate().value(), pool.allocate().value()};
  register_chain(pool, ids, tokens);
  pool.release(ids[0]);  // the parent is released first: evicted first
  pool.release(ids[1]);
  const BlockId reused = pool.allocate().value();
  ASSERT_EQ(reused, ids[0]);
  // The same id takes the same first block again: a new generation, so the old child does not follow.
  ASSERT_EQ(pool.register_block(reused, std::nullopt, BlockPool::kRootHash, std::span(tokens).first(kBlock), false),
            reused);
  EXPECT_EQ(pool.peek_prefix(tokens).blocks, std::vector<BlockId>{reused});
}

TEST(BlockPoolTest, RegisteringEqualContentReturnsTheCachedBlock) {
  BlockPool pool(3, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock, 5);
  const BlockId first = pool.allocate().value(), second = pool.allocate().value();
  ASSERT_EQ(pool.register_block(first, std::nullopt, BlockPool::kRootHash, tokens, true), first);
  EXPECT_EQ(pool.register_block(second, std::nullopt, BlockPool::kRootHash, tokens, false), first);
  EXPECT_FALSE(pool.registered(second));
  EXPECT_TRUE(pool.has_draft_context(first));
}

TEST(BlockPoolTest, DraftBlocksCountTheLeadingBlocksWithDrafterContext) {
  BlockPool pool(4, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(3 * kBlock + 1, 0);
  const std::vector<BlockId> ids = {pool.allocate().value(), pool.allocate().value(), pool.allocate().value()};
  uint64_t parent_hash = BlockPool::kRootHash;
  const bool draft[] = {true, false, true};
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto part = std::span(tokens).subspan(i * kBlock, kBlock);
    pool.register_block(ids[i], i ? std::optional<BlockId>(ids[i - 1]) : std::nullopt, parent_hash, part, draft[i]);
    parent_hash = BlockPool::chain_hash(parent_hash, part);
  }
  const PrefixMatch match = pool.peek_prefix(tokens);
  EXPECT_EQ(match.blocks.size(), 3U);
  EXPECT_EQ(match.draft_blocks, 1);
}

TEST(BlockPoolTest, UnregisteringAPrivateBlockMakesItFreeOnRelease) {
  BlockPool pool(2, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock + 1, 0);
  const BlockId id = pool.allocate().value();
  register_chain(pool, {id}, tokens);
  pool.unregister(id);
  EXPECT_TRUE(pool.peek_prefix(tokens).blocks.empty());
  pool.release(id);
  EXPECT_EQ(pool.stats().free, 2);
  EXPECT_EQ(pool.stats().cached, 0);
}

// A tail (a sequence's last, partial block) after a registered block: found by its parent and
// its first tokens, never past the last token, which must run.
TEST(BlockPoolTest, ATailLendsTheRowsThatAgreeWithTheRest) {
  BlockPool pool(4, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock + 3, 0);  // a full block, a tail of 3
  const auto [full, tail] = cache_block_and_tail(pool, tokens, 3);
  EXPECT_EQ(pool.stats().cached, 2);

  std::vector<int32_t> next = tokens;
  next.push_back(50);  // the tail and more: all 3 rows
  PrefixMatch match = pool.peek_prefix(next);
  EXPECT_EQ(match.blocks, std::vector<BlockId>{full});
  EXPECT_EQ(match.partial, tail);
  EXPECT_EQ(match.partial_tokens, 3);
  EXPECT_EQ(match.evictable, 1) << "of the full blocks";
  // Exactly the tail's tokens: the last one must still run.
  EXPECT_EQ(pool.peek_prefix(tokens).partial_tokens, 2);
  // Diverging after its first token: one row.
  std::vector<int32_t> diverging(tokens.begin(), tokens.begin() + kBlock + 1);
  diverging.insert(diverging.end(), {77, 78});
  EXPECT_EQ(pool.peek_prefix(diverging).partial_tokens, 1);
  // Diverging at once: nothing.
  std::vector<int32_t> other(tokens.begin(), tokens.begin() + kBlock);
  other.insert(other.end(), {77, 78});
  EXPECT_FALSE(pool.peek_prefix(other).partial);

  match = pool.match_prefix(next);
  EXPECT_EQ(pool.ref_count(tail), 1) << "retained for the caller, like the full blocks";
  EXPECT_EQ(pool.stats().hit_tokens, kBlock + 3);
}

// A prompt diverging inside a cached full block borrows the rows before the divergence.
TEST(BlockPoolTest, AFullBlockMatchedInPartLendsItsFirstRows) {
  BlockPool pool(4, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock + 1, 0);
  const std::vector<BlockId> ids = {pool.allocate().value(), pool.allocate().value()};
  register_chain(pool, ids, tokens);
  std::vector<int32_t> other(tokens.begin(), tokens.begin() + kBlock + 2);
  other.insert(other.end(), {90, 91, 92, 93});
  const PrefixMatch match = pool.peek_prefix(other);
  EXPECT_EQ(match.blocks, std::vector<BlockId>{ids[0]});
  EXPECT_EQ(match.partial, ids[1]);
  EXPECT_EQ(match.partial_tokens, 2);
  EXPECT_EQ(match.evictable, 0) << "both are held by their writer";
  // At the start of a sequence too.
  const std::vector<int32_t> early = {0, 1, 90, 91};
  EXPECT_TRUE(pool.peek_prefix(early).blocks.empty());
  EXPECT_EQ(pool.peek_prefix(early).partial, ids[0]);
  EXPECT_EQ(pool.peek_prefix(early).partial_tokens, 2);
}

TEST(BlockPoolTest, TheBlockThatAgreesLongestIsLent) {
  BlockPool pool(4, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock + 3, 0);
  const BlockId full = pool.allocate().value(), shorter = pool.allocate().value(), longer = pool.allocate().value();
  const std::vector<uint64_t> hashes = register_chain(pool, {full}, tokens);
  ASSERT_TRUE(pool.register_tail(shorter, full, hashes[0], std::span(tokens).subspan(kBlock, 1)));
  ASSERT_TRUE(pool.register_tail(longer, full, hashes[0], std::span(tokens).subspan(kBlock, 3)));
  std::vector<int32_t> next = tokens;
  next.push_back(9);
  EXPECT_EQ(pool.peek_prefix(next).partial, longer);
  // A tail that a cached block already begins with adds nothing: it is not registered.
  const BlockId again = pool.allocate().value();
  EXPECT_FALSE(pool.register_tail(again, full, hashes[0], std::span(tokens).subspan(kBlock, 2)));
  EXPECT_FALSE(pool.registered(again));
  pool.release(again);
  EXPECT_EQ(pool.stats().free, 1);
}

TEST(BlockPoolTest, AnEvictedTailIsFoundNoMore) {
  BlockPool pool(2, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock + 3, 0);
  const auto [full, tail] = cache_block_and_tail(pool, tokens, 2);
  EXPECT_EQ(pool.peek_prefix(tokens).partial, tail);
  EXPECT_EQ(pool.allocate().value(), tail);
  EXPECT_FALSE(pool.peek_prefix(tokens).partial);
  EXPECT_EQ(pool.peek_prefix(tokens).blocks, std::vector<BlockId>{full});
}

// A partial match saves compute, not a block: with no block left to copy it into, once it is
// held, its rows are computed again, and admission does not wait for it.
TEST(BlockPoolTest, APartialMatchIsLentOnlyWithABlockToCopyItInto) {
  BlockPool pool(2, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock + 3, 0);
  const auto [full, tail] = cache_block_and_tail(pool, tokens, 2);
  EXPECT_TRUE(pool.can_admit(tokens, 2 * kBlock));
  const PrefixMatch match = pool.match_prefix(tokens);
  EXPECT_EQ(match.blocks, std::vector<BlockId>{full});
  EXPECT_FALSE(match.partial);
  EXPECT_EQ(match.partial_tokens, 0);
  EXPECT_EQ(pool.ref_count(tail), 0);
  EXPECT_EQ(pool.stats().hit_tokens, kBlock);
}

TEST(BlockPoolTest, MisusedTailsAreTypedErrors) {
  BlockPool pool(4, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock, 0);
  const BlockId full = pool.allocate().value(), tail = pool.allocate().value(), other = pool.allocate().value();
  const std::vector<uint64_t> hashes = register_chain(pool, {full}, tokens);
  const auto rest = std::span(tokens).subspan(kBlock);
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.register_tail(tail, full, hashes[0], rest); });  // a whole block
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.register_tail(tail, full, hashes[0], rest.first(0)); });
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.register_tail(tail, full, 12345, rest.first(2)); });
  ASSERT_TRUE(pool.register_tail(tail, full, hashes[0], rest.first(2)));
  // Nothing follows a tail, and it never holds the drafter's context.
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.register_tail(other, tail, hashes[0], rest.first(1)); });
  expect_code(ErrorCode::kInvalidArgument,
              [&] { pool.register_block(other, tail, hashes[0], std::span(tokens).first(kBlock), false); });
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.mark_draft_context(tail); });
  EXPECT_FALSE(pool.registered(other));
  pool.retain(tail);
  expect_code(ErrorCode::kInvalidArgument, [&] { pool.register_tail(tail, full, hashes[0], rest.first(1)); });
}

}  // namespace
}  // namespace flashq
