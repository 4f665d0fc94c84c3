// Block tables over one block pool (worker/model/block_table.h): prefix sharing between
// sequences, private tails, truncation (copy on write of a shared tail), admission and
// preemption, and a randomized run checked against a model of what each block holds.
#include "worker/model/block_table.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "shared/error.h"
#include "worker/model/preemption_policy.h"

namespace flashq {
namespace {

constexpr int64_t kBlock = 4;

std::vector<int32_t> iota_tokens(size_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Runs `tokens` through a table as a prefill would: reserve, write, commit, register.
void prefill(BlockTable& table, std::span<const int32_t> tokens) {
  ASSERT_TRUE(table.reserve(static_cast<int64_t>(tokens.size())));
  table.commit(static_cast<int64_t>(tokens.size()) - table.length());
  table.commit_full_blocks(tokens, table.length());  // the drafter's context written too
}

TEST(BlockTableTest, TakesBlocksAsTheSequenceGrows) {
  BlockPool pool(8, kBlock);
  BlockTable table(pool);
  EXPECT_TRUE(table.reserve(1));
  EXPECT_EQ(table.blocks().size(), 1U);
  table.commit(1);
  EXPECT_TRUE(table.reserve(kBlock));
  EXPECT_EQ(table.blocks().size(), 1U);
  EXPECT_EQ(table.blocks_needed(kBlock + 1), 1);
  EXPECT_TRUE(table.reserve(kBlock + 1));
  EXPECT_EQ(table.blocks().size(), 2U);
  EXPECT_EQ(pool.stats().used, 2);
  EXPECT_THROW(table.commit(2 * kBlock), Error);
  EXPECT_EQ(table.length(), 1);
}

TEST(BlockTableTest, SequencesWithACommonPrefixShareItsFullBlocks) {
  BlockPool pool(16, kBlock);
  std::vector<int32_t> prompt = iota_tokens(2 * kBlock + 2, 0);  // two full blocks, a tail of 2
  BlockTable first(pool);
  prefill(first, prompt);
  EXPECT_EQ(first.registered_blocks(), 2);

  std::vector<int32_t> other = prompt;
  other.push_back(77);  // the same prompt and more
  BlockTable second(pool);
  const PrefixMatch match = second.adopt_prefix(other);
  EXPECT_EQ(match.blocks.size(), 2U);
  EXPECT_EQ(match.draft_blocks, 2);
  EXPECT_EQ(second.length(), 2 * kBlock);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(second.blocks()[i], first.blocks()[i]);
    EXPECT_EQ(pool.ref_count(first.blocks()[i]), 2);
  }
  prefill(second, other);
  // Partial tails are never shared: each sequence writes its own.
  EXPECT_NE(second.blocks()[2], first.blocks()[2]);
  EXPECT_EQ(pool.ref_count(first.blocks()[2]), 1);
  EXPECT_FALSE(pool.registered(first.blocks()[2]));
  EXPECT_EQ(pool.stats().used, 4);
  EXPECT_EQ(pool.stats().hit_tokens, 2 * kBlock);
  EXPECT_EQ(pool.stats().lookup_tokens, static_cast<int64_t>(other.size()));

  first.clear();
  EXPECT_EQ(pool.ref_count(second.blocks()[0]), 1);
  EXPECT_EQ(pool.stats().free, 16 - 3);
}

TEST(BlockTableTest, ATailFilledLaterIsRegisteredAndSharedAfterwards) {
  BlockPool pool(16, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(3 * kBlock, 0);
  BlockTable first(pool);
  prefill(first, std::span(tokens).first(kBlock + 1));
  EXPECT_EQ(first.registered_blocks(), 1);
  ASSERT_TRUE(first.reserve(2 * kBlock));
  first.commit(kBlock - 1);  // decoding filled the second block
  first.commit_full_blocks(tokens, kBlock);  // the drafter has not caught up on the second block
  EXPECT_EQ(first.registered_blocks(), 2);
  BlockTable second(pool);
  const PrefixMatch match = second.adopt_prefix(tokens);
  EXPECT_EQ(match.blocks.size(), 2U);
  EXPECT_EQ(match.draft_blocks, 1);  // the second block was registered without drafter rows
}

TEST(BlockTableTest, DrafterContextIsMarkedOnceTheWriterCaughtUp) {
  BlockPool pool(16, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock + 1, 0);
  BlockTable writer(pool);
  ASSERT_TRUE(writer.reserve(2 * kBlock + 1));
  writer.commit(2 * kBlock + 1);
  writer.commit_full_blocks(tokens, 0);  // the drafter injects lazily: nothing yet
  BlockTable early(pool);
  EXPECT_EQ(early.adopt_prefix(tokens).draft_blocks, 0);
  early.commit_draft_context(2 * kBlock);  // not its rows to vouch for
  EXPECT_FALSE(pool.has_draft_context(early.blocks()[0]));
  writer.commit_draft_context(kBlock + 3);
  EXPECT_TRUE(pool.has_draft_context(writer.blocks()[0]));
  EXPECT_FALSE(pool.has_draft_context(writer.blocks()[1]));
  writer.commit_draft_context(2 * kBlock + 1);
  BlockTable late(pool);
  EXPECT_EQ(late.adopt_prefix(tokens).draft_blocks, 2);
}

TEST(BlockTableTest, SlotsAddressRowsThroughTheTable) {
  BlockPool pool(8, kBlock);
  BlockTable filler(pool), table(pool);
  ASSERT_TRUE(filler.reserve(1));
  ASSERT_TRUE(table.reserve(kBlock + 1));
  EXPECT_EQ(table.slot(0), table.blocks()[0] * kBlock);
  EXPECT_EQ(table.slot(kBlock + 1), table.blocks()[1] * kBlock + 1);
  EXPECT_THROW(table.slot(2 * kBlock), Error);
}

TEST(BlockTableTest, AdmissionOfANewSequenceCountsItsCachedPrefix) {
  BlockPool pool(4, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock + 1, 0);
  {
    BlockTable done(pool);
    prefill(done, tokens);
  }  // two blocks cached, two free
  BlockTable other(pool);
  ASSERT_TRUE(other.reserve(kBlock));  // one free left, two evictable
  // The prefix covers 2 of the 3 blocks of 9 positions: one more is needed, and one is free.
  EXPECT_TRUE(pool.can_admit(tokens, 2 * kBlock + 1));
  // 4 blocks: 2 more than the prefix, but adopting the prefix takes the evictable ones.
  EXPECT_FALSE(pool.can_admit(tokens, 4 * kBlock));
  // Without a prefix hit the cached blocks are evictable: 3 blocks fit.
  EXPECT_TRUE(pool.can_admit(iota_tokens(1, 50), 3 * kBlock));
  EXPECT_FALSE(pool.can_admit(iota_tokens(1, 50), 3 * kBlock + 1));
  EXPECT_THROW(static_cast<void>(pool.can_admit(tokens, 1)), Error);
}

TEST(BlockTableTest, ARecomputedEqualBlockIsSwappedForTheCachedOne) {
  BlockPool pool(16, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock + 1, 0);
  BlockTable first(pool), second(pool);
  ASSERT_TRUE(first.reserve(kBlock + 1));
  ASSERT_TRUE(second.reserve(kBlock + 1));  // both prefill the same prompt at once
  first.commit(kBlock + 1);
  second.commit(kBlock + 1);
  first.commit_full_blocks(tokens, kBlock + 1);
  const BlockId own = second.blocks()[0];
  second.commit_full_blocks(tokens, kBlock + 1);
  EXPECT_EQ(second.blocks()[0], first.blocks()[0]);
  EXPECT_EQ(pool.ref_count(first.blocks()[0]), 2);
  EXPECT_EQ(pool.ref_count(own), 0);
  EXPECT_EQ(pool.stats().used, 3);
}

TEST(BlockTableTest, TruncationReturnsWholeBlocksOnly) {
  BlockPool pool(8, kBlock);
  BlockTable table(pool);
  const std::vector<int32_t> tokens = iota_tokens(3 * kBlock, 0);
  ASSERT_TRUE(table.reserve(3 * kBlock));
  table.commit(3 * kBlock);
  const auto copies = table.truncate(kBlock + 1);
  ASSERT_TRUE(copies.has_value());
  EXPECT_TRUE(copies->empty());
  EXPECT_EQ(table.length(), kBlock + 1);
  EXPECT_EQ(table.blocks().size(), 2U);
  EXPECT_EQ(pool.stats().free, 6);
  EXPECT_THROW(static_cast<void>(table.truncate(kBlock + 2)), Error);  // past the length
}

TEST(BlockTableTest, TruncatingIntoASharedBlockCopiesItFirst) {
  BlockPool pool(8, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock + 1, 0);
  BlockTable first(pool), second(pool);
  prefill(first, tokens);
  second.adopt_prefix(tokens);
  const BlockId shared = second.blocks()[1];
  ASSERT_EQ(pool.ref_count(shared), 2);

  const auto copies = second.truncate(kBlock + 2);  // into the shared second block
  ASSERT_TRUE(copies.has_value());
  ASSERT_EQ(copies->size(), 1U);
  EXPECT_EQ((*copies)[0].from, shared);
  EXPECT_EQ((*copies)[0].to, second.blocks()[1]);
  EXPECT_EQ((*copies)[0].rows, 2);
  EXPECT_NE(second.blocks()[1], shared);
  EXPECT_EQ(pool.ref_count(shared), 1);
  EXPECT_TRUE(pool.registered(shared));  // the first sequence's block is untouched
  EXPECT_FALSE(pool.registered(second.blocks()[1]));
  EXPECT_EQ(second.registered_blocks(), 1);
  EXPECT_EQ(first.registered_blocks(), 2);
}

TEST(BlockTableTest, TruncatingIntoItsOwnRegisteredBlockUncachesIt) {
  BlockPool pool(8, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock + 1, 0);
  BlockTable table(pool);
  prefill(table, tokens);
  const BlockId second_block = table.blocks()[1];
  const auto copies = table.truncate(kBlock + 1);
  ASSERT_TRUE(copies.has_value());
  EXPECT_TRUE(copies->empty());
  EXPECT_EQ(table.blocks()[1], second_block);
  EXPECT_FALSE(pool.registered(second_block));
  EXPECT_EQ(pool.peek_prefix(tokens).blocks.size(), 1U);
}

TEST(BlockTableTest, ACopyOnWriteWithNoBlockLeftChangesNothing) {
  BlockPool pool(2, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock, 0);
  BlockTable first(pool), second(pool);
  prefill(first, tokens);
  std::vector<int32_t> longer = tokens;
  longer.push_back(1);
  second.adopt_prefix(longer);
  ASSERT_EQ(second.length(), 2 * kBlock);
  EXPECT_FALSE(second.truncate(kBlock + 1).has_value());
  EXPECT_EQ(second.length(), 2 * kBlock);
  EXPECT_EQ(second.blocks()[1], first.blocks()[1]);
  EXPECT_EQ(pool.ref_count(first.blocks()[1]), 2);
}

TEST(BlockTableTest, AdmissionCountsEvictableBlocksAndWaitsInsteadOfFailing) {
  BlockPool pool(4, kBlock);
  BlockTable first(pool);
  const std::vector<int32_t> tokens = iota_tokens(2 * kBlock, 0);
  prefill(first, tokens);
  first.clear();  // both blocks cached now
  EXPECT_EQ(pool.stats().cached, 2);
  BlockTable second(pool);
  EXPECT_TRUE(second.reserve(4 * kBlock));  // takes the free ones, then evicts the cached
  EXPECT_EQ(pool.stats().evictions, 2);
  BlockTable third(pool);
  EXPECT_FALSE(third.reserve(1));  // exhausted: a refusal, nothing taken
  EXPECT_EQ(third.blocks().size(), 0U);
  EXPECT_FALSE(pool.can_allocate(1));
  second.commit(2 * kBlock);
  ASSERT_TRUE(second.truncate(2 * kBlock).has_value());  // the room reserved past the length goes back
  EXPECT_EQ(pool.stats().free, 2);
  EXPECT_TRUE(third.reserve(1));
}

TEST(BlockTableTest, AdoptingIsOnlyForAnEmptyTable) {
  BlockPool pool(4, kBlock);
  BlockTable table(pool);
  ASSERT_TRUE(table.reserve(1));
  EXPECT_THROW(table.adopt_prefix(iota_tokens(9, 0)), Error);
  table.commit(1);
  EXPECT_THROW(table.commit_full_blocks({}, 0), Error);  // fewer tokens than positions
}

TEST(BlockTableTest, PreemptsTheLastAdmittedSequenceHoldingBlocks) {
  const std::vector<PreemptionCandidate> running = {{1, 10, 3}, {2, 12, 0}, {3, 11, 2}};
  EXPECT_EQ(choose_preemption_victim(running), 2U);
  const std::vector<PreemptionCandidate> empty = {{1, 10, 0}};
  EXPECT_FALSE(choose_preemption_victim(empty).has_value());
}

// A randomized run: sequences from a few shared prompts grow, register, truncate and finish;
// a model of every block's rows, written as the tables say, must give back each sequence's
// tokens (sharing never lets one sequence see another's rows), the pool's counts must match the
// tables', and every registered block a sequence holds must be found again by its tokens.
TEST(BlockTableTest, RandomOperationsKeepEveryBlockConsistent) {
  constexpr int64_t kBlocks = 24;
  BlockPool pool(kBlocks, kBlock);
  std::mt19937 rng(1234);
  struct Live {
    std::unique_ptr<BlockTable> table;
    std::vector<int32_t> tokens;
  };
  std::vector<Live> live;
  std::map<BlockId, std::vector<int32_t>> rows;  // what each block holds, row by row
  int64_t copies_made = 0, partial_hits = 0, tails_kept = 0;
  const auto copy = [&](const BlockCopy& c) {
    std::vector<int32_t> r = rows[c.from];
    std::fill(r.begin() + c.rows, r.end(), -1);
    rows[c.to] = r;
  };
  const auto write = [&](const BlockTable& t, int64_t position, int32_t token) {
    std::vector<int32_t>& r = rows[t.blocks()[static_cast<size_t>(position / kBlock)]];
    r.resize(kBlock, -1);
    r[static_cast<size_t>(position % kBlock)] = token;
  };
  const auto pick = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng); };

  for (int step = 0; step < 3000; ++step) {
    const int64_t op = pick(6);
    if (op == 0 && live.size() < 6) {  // a new sequence on one of three prompts
      Live s{std::make_unique<BlockTable>(pool), {}};
      const int32_t prompt = static_cast<int32_t>(pick(3));
      const int64_t length = 1 + pick(3 * kBlock);
      for (int64_t i = 0; i < length; ++i) s.tokens.push_back(prompt * 100 + static_cast<int32_t>(i % 7));
      const PrefixMatch match = s.table->adopt_prefix(s.tokens);
      if (match.partial_copy) {
        copy(*match.partial_copy);
        ++partial_hits;
      }
      const int64_t from = s.table->length();
      if (!s.table->reserve(length)) continue;  // the pool is full: it waits (its table gives back what it took)
      for (int64_t p = from; p < length; ++p) write(*s.table, p, s.tokens[static_cast<size_t>(p)]);
      s.table->commit(length - from);
      s.table->commit_full_blocks(s.tokens, pick(length + 1));
      live.push_back(std::move(s));
    } else if (live.empty()) {
      continue;
    } else {
      Live& s = live[static_cast<size_t>(pick(static_cast<int64_t>(live.size())))];
      BlockTable& t = *s.table;
      if (op <= 2) {  // a step: a draft block written, part of it kept
        const int64_t block = 1 + pick(5);
        if (!t.reserve(t.length() + block)) continue;
        const int64_t start = t.length();
        for (int64_t i = 0; i < block; ++i) {
          const int32_t token = static_cast<int32_t>(pick(3));
          write(t, start + i, token);
          s.tokens.resize(static_cast<size_t>(start + i));
          s.tokens.push_back(token);
        }
        t.commit(block);
        const int64_t kept = start + 1 + pick(block);
        ASSERT_TRUE(t.truncate(kept).value().empty());  // a private tail needs no copy
        s.tokens.resize(static_cast<size_t>(kept));
        t.commit_full_blocks(s.tokens, t.length() - pick(kBlock));
        t.commit_draft_context(t.length());
      } else if (op == 3) {  // truncation anywhere, shared blocks included
        const int64_t kept = pick(t.length() + 1);
        const auto copies = t.truncate(kept);
        if (!copies) continue;
        for (const BlockCopy& c : *copies) {
          copy(c);
          ++copies_made;
        }
        s.tokens.resize(static_cast<size_t>(kept));
      } else {  // finished, half the time keeping its last partial block as a tail
        if (pick(2) == 0) {
          tails_kept += t.length() % kBlock > 0;
          t.clear_keeping_tail(s.tokens);
        }
        std::swap(s, live.back());
        live.pop_back();
      }
    }

    // The pool's counts are the tables' references.
    std::map<BlockId, int32_t> refs;
    for (const Live& l : live) {
      for (BlockId id : l.table->blocks()) ++refs[id];
    }
    int64_t used = 0, cached = 0;
    for (BlockId id = 0; id < kBlocks; ++id) {
      ASSERT_EQ(pool.ref_count(id), refs[id]) << "block " << id << " at step " << step;
      used += refs[id] > 0;
      cached += refs[id] == 0 && pool.registered(id);
    }
    const BlockPoolStats stats = pool.stats();
    ASSERT_EQ(stats.used, used);
    ASSERT_EQ(stats.cached, cached);
    ASSERT_EQ(stats.used + stats.cached + stats.free, kBlocks);
    for (const Live& l : live) {
      const BlockTable& t = *l.table;
      ASSERT_EQ(t.length(), static_cast<int64_t>(l.tokens.size()));
      ASSERT_GE(t.capacity(), t.length());
      // Every position reads back its token through the table.
      for (int64_t p = 0; p < t.length(); ++p) {
        const std::vector<int32_t>& r = rows[t.blocks()[static_cast<size_t>(p / kBlock)]];
        ASSERT_EQ(r.at(static_cast<size_t>(p % kBlock)), l.tokens[static_cast<size_t>(p)])
            << "position " << p << " at step " << step;
      }
      // Its registered blocks, being referenced, are found again as the prefix of its tokens.
      const auto registered = static_cast<size_t>(t.registered_blocks());
      std::vector<int32_t> probe(l.tokens.begin(), l.tokens.begin() + static_cast<std::ptrdiff_t>(registered * kBlock));
      probe.push_back(0);
      const std::vector<BlockId> found = pool.peek_prefix(probe).blocks;
      ASSERT_EQ(found, std::vector<BlockId>(t.blocks().begin(), t.blocks().begin() + static_cast<std::ptrdiff_t>(registered)))
          << "at step " << step;
      // The block being written and those after it are private.
      for (size_t b = static_cast<size_t>(t.length() / kBlock); b < t.blocks().size(); ++b) {
        ASSERT_EQ(pool.ref_count(t.blocks()[b]), 1);
        ASSERT_FALSE(pool.registered(t.blocks()[b]));
      }
    }
  }
  EXPECT_GT(pool.stats().hit_tokens, 0);
  EXPECT_GT(pool.stats().evictions, 0);
  EXPECT_GT(copies_made, 0);
  EXPECT_GT(partial_hits, 0) << "rows borrowed from a block matched in part";
  EXPECT_GT(tails_kept, 0);
  live.clear();
  EXPECT_EQ(pool.stats().used, 0);
}

// A sequence that ends keeps its last partial block as a tail; the next turn, extending it,
// copies its rows into a block of its own and goes on from there.
TEST(BlockTableTest, TheNextTurnCopiesTheTailOfTheTurnBefore) {
  BlockPool pool(8, kBlock);
  const std::vector<int32_t> turn = iota_tokens(2 * kBlock + 3, 0);
  BlockId tail;
  {
    BlockTable first(pool);
    prefill(first, turn);
    tail = first.blocks()[2];
    first.clear_keeping_tail(turn);
  }
  EXPECT_TRUE(pool.registered(tail));
  EXPECT_EQ(pool.stats().cached, 3);

  std::vector<int32_t> next = turn;
  next.insert(next.end(), {40, 41});
  BlockTable second(pool);
  const PrefixMatch match = second.adopt_prefix(next);
  EXPECT_EQ(match.blocks.size(), 2U);
  ASSERT_TRUE(match.partial_copy);
  EXPECT_EQ(match.partial_copy->from, tail);
  EXPECT_EQ(match.partial_copy->to, second.blocks()[2]);
  EXPECT_EQ(match.partial_copy->rows, 3);
  EXPECT_EQ(second.length(), 2 * kBlock + 3);
  EXPECT_EQ(pool.ref_count(second.blocks()[2]), 1);
  EXPECT_FALSE(pool.registered(second.blocks()[2])) << "the copy is the table's own, to write";
  EXPECT_TRUE(pool.registered(tail));
  EXPECT_EQ(pool.ref_count(tail), 0) << "cached again";
  prefill(second, next);
  EXPECT_EQ(second.registered_blocks(), 3);
  EXPECT_EQ(pool.stats().hit_tokens, 2 * kBlock + 3);
}

TEST(BlockTableTest, ATailIsKeptOnlyAfterRegisteredBlocks) {
  BlockPool pool(8, kBlock);
  const std::vector<int32_t> tokens = iota_tokens(kBlock + 2, 0);
  BlockTable table(pool);
  ASSERT_TRUE(table.reserve(kBlock + 2));
  table.commit(kBlock + 2);  // nothing registered: a tail could not be walked to
  table.clear_keeping_tail(tokens);
  EXPECT_EQ(pool.stats().cached, 0);
  EXPECT_EQ(pool.stats().free, 8);
  BlockTable whole(pool);
  prefill(whole, std::span(tokens).first(kBlock));  // no partial block: nothing to keep
  whole.clear_keeping_tail(tokens);
  EXPECT_EQ(pool.stats().cached, 1);
}

}  // namespace
}  // namespace flashq
