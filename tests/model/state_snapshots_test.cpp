// The recurrent-state snapshots of a hybrid model's prefix cache (worker/model/state_snapshots.h):
// a snapshot marks its block in the pool, a match ends at the last marked block of its run or at a
// marked tail it takes whole, a snapshot restores exactly the state kept, and one given up (capacity) or whose block was taken
// for new content restores nothing and no longer marks the block.
#include "worker/model/state_snapshots.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/backend.h"
#include "worker/model/block_pool.h"

namespace flashq {
namespace {

LinearAttentionConfig tiny_shape() {
  LinearAttentionConfig l;
  l.key_heads = 1, l.value_heads = 2, l.key_head_dim = 4, l.value_head_dim = 4, l.conv_kernel = 3;
  return l;
}

std::vector<float> read(Backend& backend, const Tensor& t) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  backend.copy_to_host(t, values.data());
  return values;
}

// Fills every live tensor of `state` with `value`.
void fill(Backend& backend, RecurrentState& state, float value) {
  for (int64_t l = 0; l < state.layers(); ++l) {
    RecurrentState::Layer& layer = state.layer(l);
    for (Tensor* t : {&layer.conv_q, &layer.conv_k, &layer.conv_v, &layer.matrix}) {
      const std::vector<float> values(static_cast<size_t>(t->numel()), value);
      backend.copy_from_host(values.data(), *t);
    }
  }
}

TEST(StateSnapshots, MatchesEndAtTheLastBlockWithASnapshot) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  BlockPool pool(8, 4);
  StateSnapshots snapshots(*backend, tiny_shape(), 2, 4, pool);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  std::optional<BlockId> parent;
  uint64_t hash = BlockPool::kRootHash;
  std::vector<BlockId> blocks;
  for (int64_t i = 0; i < 3; ++i) {
    const BlockId id = *pool.allocate();
    const std::span<const int32_t> part = std::span(tokens).subspan(static_cast<size_t>(4 * i), 4);
    ASSERT_EQ(pool.register_block(id, parent, hash, part, false), id);
    hash = BlockPool::chain_hash(hash, part);
    parent = id;
    blocks.push_back(id);
  }
  EXPECT_TRUE(pool.peek_prefix(tokens).blocks.empty()) << "no snapshot: no match";
  RecurrentState state(*backend, tiny_shape(), 2);
  fill(*backend, state, 0.5f);
  snapshots.keep(blocks[1], state);
  EXPECT_EQ(pool.peek_prefix(tokens).blocks, (std::vector<BlockId>{blocks[0], blocks[1]}));

  RecurrentState restored(*backend, tiny_shape(), 2);
  ASSERT_TRUE(snapshots.restore(blocks[1], restored));
  EXPECT_EQ(read(*backend, restored.layer(1).matrix), read(*backend, state.layer(1).matrix));
  EXPECT_EQ(read(*backend, restored.layer(0).conv_v), std::vector<float>(2 * 8, 0.5f));
  EXPECT_FALSE(snapshots.restore(blocks[0], restored));
}

// A sequence's last, partial block registered as a tail, with the state after its last token
// kept: a match that takes the whole tail ends there; one that takes only some of its tokens, or
// a tail without a snapshot, ends at the last full block with one.
TEST(StateSnapshots, AWholeTailWithASnapshotEndsAMatch) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  BlockPool pool(8, 4);
  StateSnapshots snapshots(*backend, tiny_shape(), 1, 4, pool);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const BlockId first = *pool.allocate();
  ASSERT_EQ(pool.register_block(first, std::nullopt, BlockPool::kRootHash, std::span(tokens).first(4), false), first);
  const uint64_t first_hash = BlockPool::chain_hash(BlockPool::kRootHash, std::span(tokens).first(4));
  const BlockId tail = *pool.allocate();
  ASSERT_TRUE(pool.register_tail(tail, first, first_hash, std::span(tokens).subspan(4, 3)));
  RecurrentState state(*backend, tiny_shape(), 1);
  snapshots.keep(first, state);

  // The tail (5, 6, 7) has no snapshot yet.
  EXPECT_EQ(pool.peek_prefix(tokens).positions(4), 4);
  snapshots.keep(tail, state);
  const PrefixMatch whole = pool.peek_prefix(tokens);
  EXPECT_EQ(whole.blocks, std::vector<BlockId>{first});
  EXPECT_EQ(whole.partial, std::optional<BlockId>(tail));
  EXPECT_EQ(whole.positions(4), 7);
  // 1..6 then 9: two of the tail's three tokens agree.
  const std::vector<int32_t> diverging = {1, 2, 3, 4, 5, 6, 9, 10};
  const PrefixMatch some = pool.peek_prefix(diverging);
  EXPECT_FALSE(some.partial.has_value());
  EXPECT_EQ(some.positions(4), 4);
}

TEST(StateSnapshots, OneGivenUpOrOutlivedByItsBlocksContentRestoresNothing) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  BlockPool pool(4, 4);
  StateSnapshots snapshots(*backend, tiny_shape(), 1, 1, pool);
  RecurrentState state(*backend, tiny_shape(), 1);
  const BlockId a = *pool.allocate(), b = *pool.allocate();
  snapshots.keep(a, state);
  snapshots.keep(b, state);  // capacity 1: a's is given up
  EXPECT_FALSE(pool.has_state_snapshot(a));
  EXPECT_TRUE(pool.has_state_snapshot(b));
  EXPECT_FALSE(snapshots.restore(a, state));
  EXPECT_EQ(snapshots.kept(), 1);
  pool.release(b);  // unregistered: free, then taken for new content
  const BlockId again = *pool.allocate();
  ASSERT_EQ(again, b);
  EXPECT_FALSE(pool.has_state_snapshot(b));
  EXPECT_FALSE(snapshots.restore(b, state));
}

}  // namespace
}  // namespace flashq
