// The engine on a paged KV cache (kv_cache.h, paged_kv_store.h): greedy output identical to
// whole-length caches in every speculation mode, prompts that share a prefix reuse its blocks
// and prefill only the rest, a later turn of a conversation starts on the blocks of the turn
// before, sequences wait for blocks at admission and are preempted and recomputed when the pool
// runs out mid-decode (output unchanged), cached blocks are evicted for new ones, and a shared
// block truncated into is copied first; over float32 and bf16 caches, and on a gpt-oss model
// whose sliding-window layers keep only their window's blocks (window_table.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "tests/engine/dflash_test_pair.h"
#include "tests/engine/moe_targets.h"
#include "worker/model/kv_cache_dtype.h"
#include "worker/model/paged_kv_store.h"

namespace flashq::testing {
namespace {

constexpr int32_t kVocab = 459;

// A prompt of `shared` tokens every seed has (a system prompt), then `own` tokens of its own.
std::vector<int32_t> prompt_with_prefix(size_t shared, size_t own, uint32_t seed) {
  std::vector<int32_t> prompt = some_tokens(shared, kVocab, 1000);
  const std::vector<int32_t> tail = some_tokens(own, kVocab, seed);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  return prompt;
}

// The caches' element type, and whether the target is a gpt-oss model whose every other layer
// attends a window of 12 positions (longer than a block of 8, shorter than one of 16).
struct PagedCase {
  DType dtype;
  bool windowed;
};

class EngineOnAPagedCache : public ::testing::TestWithParam<PagedCase> {
 protected:
  EngineOnAPagedCache()
      : pair(GetParam().windowed ? gpt_oss_f32_target(41, 4, 12) : f32_target(41),
             TinyDrafterSpec{.layers = 1, .block_size = 8, .seed = 42}) {
    pair.set_kv_cache_dtype(GetParam().dtype);
  }

  std::unique_ptr<PagedKvStore> store(int64_t blocks, int64_t block_size) {
    return pair.target.model->make_paged_store(blocks, block_size);
  }
  // A pool as tight for the windowed model as `blocks` is for the dense one: admission counts
  // a short sequence's window blocks as many as its full ones (BlockPool::window_blocks_for).
  static int64_t tight(int64_t blocks) { return GetParam().windowed ? 2 * blocks : blocks; }
  // Cached blocks: with windowed layers each cached block has its window's block attached.
  static int64_t cached(int64_t blocks) { return GetParam().windowed ? 2 * blocks : blocks; }

  // Each request's output decoded alone with a whole-length cache and no drafter.
  std::vector<std::vector<int32_t>> plain_outputs(const std::vector<SequenceRequest>& requests) {
    std::vector<std::vector<int32_t>> outputs;
    for (SequenceRequest r : requests) {
      r.spec = SpecMode::kOff;
      outputs.push_back(run_engine(*pair.target.model, nullptr, {r}, 1).at(0));
    }
    return outputs;
  }

  DFlashTestPair pair;
};

TEST_P(EngineOnAPagedCache, GreedyOutputIsTheWholeLengthCachesInEveryModeAndBlockSize) {
  for (int64_t block_size : {8, 16, 32}) {
    std::vector<SequenceRequest> requests;
    for (uint32_t i = 0; i < 6; ++i) {
      const SpecMode spec = i % 3 == 0 ? SpecMode::kOff : i % 3 == 1 ? SpecMode::kDflash : SpecMode::kAuto;
      requests.push_back(greedy_request(prompt_with_prefix(40, 5 + 7 * i, 10 + i), spec, 24 + i));
    }
    const auto expected = plain_outputs(requests);
    std::unique_ptr<PagedKvStore> paged = store(64, block_size);
    const auto outputs = run_engine(*pair.target.model, pair.proposer.get(), requests, 4, nullptr,
                                    {.paged_cache = paged.get()});
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(outputs[i], expected[i]) << "block " << block_size << " #" << i;
    const BlockPoolStats stats = paged->blocks().stats();
    EXPECT_EQ(stats.used, 0) << "finished sequences gave every block back";
    EXPECT_GT(stats.hit_tokens, 0) << "the shared 40-token prefix was found cached";
  }
}

TEST_P(EngineOnAPagedCache, APromptSharingACachedPrefixPrefillsOnlyTheRest) {
  std::unique_ptr<PagedKvStore> paged = store(32, 8);
  Engine engine(*pair.target.model, nullptr, {.max_slots = 2, .paged_cache = paged.get()});
  engine.add(0, greedy_request(prompt_with_prefix(43, 6, 1), SpecMode::kOff, 4));
  engine.run_until_idle();
  const BlockPoolStats first = paged->blocks().stats();
  EXPECT_EQ(first.hit_tokens, 0);
  EXPECT_EQ(first.cached, cached(7)) << "the prompt's 6 full blocks stay cached, and its last 1 and 3 of output as a tail";
  engine.add(1, greedy_request(prompt_with_prefix(43, 9, 2), SpecMode::kOff, 4));
  engine.run_until_idle();
  const BlockPoolStats second = paged->blocks().stats();
  EXPECT_EQ(second.hit_tokens, 43) << "the shared 43 tokens: 5 whole blocks and 3 rows of the sixth";
  EXPECT_EQ(second.lookup_tokens - first.lookup_tokens, 52);
  const auto expected = plain_outputs({greedy_request(prompt_with_prefix(43, 9, 2), SpecMode::kOff, 4)});
  EXPECT_EQ(engine.take_finished().back().tokens, expected[0]);
}

// Turn 2's prompt is turn 1's prompt and output and a new message: every position turn 1 ran
// is a hit (its full blocks, and its last partial block kept as a tail), in every mode, and the
// output is the one without a cache.
TEST_P(EngineOnAPagedCache, ALaterTurnStartsOnTheBlocksOfTheTurnBefore) {
  for (SpecMode spec : {SpecMode::kOff, SpecMode::kDflash, SpecMode::kAuto}) {
    std::unique_ptr<PagedKvStore> paged = store(64, 16);
    Engine engine(*pair.target.model, pair.proposer.get(),
                  {.max_slots = 2, .paged_cache = paged.get()});
    std::vector<int32_t> prompt = prompt_with_prefix(70, 3, 5);
    int64_t ran = 0;  // positions the turn before ran: its prompt and all but its last token
    for (int turn = 0; turn < 3; ++turn) {
      const int64_t lookups_before = paged->blocks().stats().lookup_tokens;
      const int64_t hits_before = paged->blocks().stats().hit_tokens;
      engine.add(static_cast<uint64_t>(turn), greedy_request(prompt, spec, 20));
      engine.run_until_idle();
      const FinishedSequence done = engine.take_finished().at(0);
      EXPECT_EQ(done.tokens, plain_outputs({greedy_request(prompt, spec, 20)}).at(0)) << "turn " << turn;
      const int64_t hits = paged->blocks().stats().hit_tokens - hits_before;
      if (turn > 0) {
        EXPECT_GE(hits, ran) << "turn " << turn;
        EXPECT_LT(hits, static_cast<int64_t>(prompt.size()) - 12 + 2) << "turn " << turn << ": the message is new";
      }
      ran = static_cast<int64_t>(prompt.size() + done.tokens.size()) - 1;
      EXPECT_EQ(paged->blocks().stats().lookup_tokens - lookups_before, static_cast<int64_t>(prompt.size()));
      prompt.insert(prompt.end(), done.tokens.begin(), done.tokens.end());
      const std::vector<int32_t> message = some_tokens(12, kVocab, 70 + static_cast<uint32_t>(turn));
      prompt.insert(prompt.end(), message.begin(), message.end());
    }
  }
}

// The drafter's context rides with the blocks: after a speculative turn its registered blocks
// hold the drafter's rows, the next turn takes them instead of skipping those positions, and it
// drafts what a drafter that injected the whole prompt itself drafts.
TEST_P(EngineOnAPagedCache, ALaterTurnTakesTheDrafterContextOfTheTurnBefore) {
  const ModelConfig& d = pair.drafter->config().layers;
  std::unique_ptr<PagedKvStore> paged =
      pair.target.model->make_paged_store(64, 8, nullptr, {d.num_layers, d.num_kv_heads, d.head_dim});
  std::vector<TraceRecord> trace;
  Engine engine(
      *pair.target.model, pair.proposer.get(),
      {.max_slots = 1, .on_trace = [&trace](const TraceRecord& r) { trace.push_back(r); }, .paged_cache = paged.get()});
  std::vector<int32_t> prompt = prompt_with_prefix(50, 3, 9);
  engine.add(0, greedy_request(prompt, SpecMode::kDflash, 30));
  engine.run_until_idle();
  const FinishedSequence first = engine.take_finished().at(0);
  EXPECT_EQ(engine.cache_stats()->draft_hit_tokens, 0);
  int64_t with_drafter_rows = 0;
  for (BlockId id = 0; id < 64; ++id) with_drafter_rows += paged->blocks().has_draft_context(id) ? 1 : 0;
  EXPECT_GE(with_drafter_rows, 8) << "the 10 full blocks of the turn's 83 positions, less the recent ones";

  prompt.insert(prompt.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int32_t> message = some_tokens(5, kVocab, 77);
  prompt.insert(prompt.end(), message.begin(), message.end());
  trace.clear();
  engine.add(1, greedy_request(prompt, SpecMode::kDflash, 12));
  engine.run_until_idle();
  const FinishedSequence second = engine.take_finished().at(0);
  EXPECT_GE(engine.cache_stats()->draft_hit_tokens, 64);
  EXPECT_EQ(second.tokens, plain_outputs({greedy_request(prompt, SpecMode::kOff, 12)}).at(0));

  // The same turn on a drafter that injects every position of the prompt itself.
  std::vector<TraceRecord> alone;
  run_engine(*pair.target.model, pair.proposer.get(), {greedy_request(prompt, SpecMode::kDflash, 12)}, 1,
             &alone);
  ASSERT_FALSE(trace.empty());
  ASSERT_EQ(trace.size(), alone.size());
  for (size_t i = 0; i < trace.size(); ++i) EXPECT_EQ(trace[i].draft, alone[i].draft) << "step " << i;
}

// A sequence that waits for its drafter's context (a cache pool with room for one) is looked up
// in the prefix cache once, when it is admitted, not at every step it waits.
TEST_P(EngineOnAPagedCache, ASequenceWaitingForItsDrafterContextIsLookedUpOnce) {
  std::unique_ptr<PagedKvStore> paged = store(64, 8);
  const std::vector<SequenceRequest> requests = {greedy_request(prompt_with_prefix(40, 3, 1), SpecMode::kDflash, 16),
                                                 greedy_request(prompt_with_prefix(40, 5, 2), SpecMode::kDflash, 16)};
  const int64_t context_bytes = CachePool::footprint(pair.drafter->make_context_cache(61).whole_bytes());
  CachePool pool(*pair.target.backend, context_bytes + CachePool::kAlignment);
  pair.proposer->use_cache_pool(&pool);
  Engine engine(*pair.target.model, pair.proposer.get(), {.max_slots = 2, .paged_cache = paged.get()});
  for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
  size_t most_running = 0;
  while (!engine.idle()) {
    engine.step();
    most_running = std::max(most_running, engine.running());
  }
  pair.proposer->use_cache_pool(nullptr);
  EXPECT_EQ(most_running, 1u) << "the second waited for the drafter's context";
  EXPECT_EQ(paged->blocks().stats().lookup_tokens, 43 + 45);
  std::vector<std::vector<int32_t>> outputs(requests.size());
  for (FinishedSequence& done : engine.take_finished()) outputs[done.id] = done.tokens;
  EXPECT_EQ(outputs, plain_outputs(requests));
}

TEST_P(EngineOnAPagedCache, WithoutPrefixCachingNothingIsLookedUpOrShared) {
  std::unique_ptr<PagedKvStore> paged = store(32, 8);
  const std::vector<SequenceRequest> requests = {greedy_request(prompt_with_prefix(40, 3, 1), SpecMode::kOff, 6),
                                                 greedy_request(prompt_with_prefix(40, 4, 2), SpecMode::kOff, 6)};
  const auto outputs = run_engine(*pair.target.model, nullptr, requests, 2, nullptr,
                                  {.paged_cache = paged.get(), .prefix_caching = false});
  EXPECT_EQ(outputs, plain_outputs(requests));
  const BlockPoolStats stats = paged->blocks().stats();
  EXPECT_EQ(stats.lookup_tokens, 0);
  EXPECT_EQ(stats.cached, 0) << "nothing registered";
  EXPECT_EQ(stats.free, 32);
}

// 12 blocks of 8 positions for four sequences that grow to 6 blocks each: admission waits for
// blocks, running sequences outgrow the pool and the newest is preempted, recomputed later from
// its cached blocks; every output is the one alone, in every mode.
TEST_P(EngineOnAPagedCache, SequencesThatOutgrowThePoolArePreemptedAndKeepTheirOutput) {
  for (SpecMode spec : {SpecMode::kOff, SpecMode::kDflash, SpecMode::kAuto}) {
    std::vector<SequenceRequest> requests;
    for (uint32_t i = 0; i < 4; ++i) requests.push_back(greedy_request(some_tokens(9, kVocab, 20 + i), spec, 38));
    std::unique_ptr<PagedKvStore> paged = store(tight(12), 8);
    Engine engine(*pair.target.model, pair.proposer.get(),
                  {.max_slots = 4, .paged_cache = paged.get()});
    for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
    size_t most_running = 0;
    while (!engine.idle()) {
      engine.step();
      most_running = std::max(most_running, engine.running());
      EXPECT_LE(paged->blocks().stats().used, tight(12));
    }
    EXPECT_GE(most_running, 2u);
    EXPECT_GT(engine.cache_stats()->preemptions, 0) << spec_mode_name(spec);
    std::vector<std::vector<int32_t>> outputs(requests.size());
    for (FinishedSequence& done : engine.take_finished()) {
      EXPECT_EQ(done.finish_reason, FinishReason::kLength);
      outputs[done.id] = done.tokens;
    }
    EXPECT_EQ(outputs, plain_outputs(requests)) << spec_mode_name(spec);
    EXPECT_EQ(paged->blocks().stats().used, 0);
  }
}

TEST_P(EngineOnAPagedCache, CachedBlocksAreEvictedLeastRecentlyUsedFirstForNewOnes) {
  std::unique_ptr<PagedKvStore> paged = store(tight(8), 8);
  Engine engine(*pair.target.model, nullptr, {.max_slots = 1, .paged_cache = paged.get()});
  std::vector<SequenceRequest> requests;
  for (uint32_t i = 0; i < 4; ++i) requests.push_back(greedy_request(some_tokens(33, kVocab, 50 + i), SpecMode::kOff, 8));
  for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
  engine.run_until_idle();
  EXPECT_GT(paged->blocks().stats().evictions, 0);
  std::vector<std::vector<int32_t>> outputs(requests.size());
  for (FinishedSequence& done : engine.take_finished()) outputs[done.id] = done.tokens;
  EXPECT_EQ(outputs, plain_outputs(requests));
  // The last prompt's blocks were released last: it is still cached, the first is not.
  engine.add(10, requests[3]);
  engine.add(11, requests[0]);
  const int64_t hits = paged->blocks().stats().hit_tokens;
  engine.run_until_idle();
  EXPECT_EQ(paged->blocks().stats().hit_tokens - hits, 32) << "the last prompt's 4 blocks, and none of the first's";
}

TEST_P(EngineOnAPagedCache, ASequenceThePoolCannotHoldIsRefusedAtOnce) {
  std::unique_ptr<PagedKvStore> paged = store(tight(4), 8);
  Engine engine(*pair.target.model, nullptr, {.max_slots = 1, .paged_cache = paged.get()});
  try {
    engine.add(1, greedy_request(some_tokens(20, kVocab, 1), SpecMode::kOff, 13));  // 33 positions: 5 blocks
    ADD_FAILURE() << "accepted a sequence larger than the pool";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string pool = "paged cache pool holds " + std::to_string(tight(4)) + " blocks";
    EXPECT_NE(std::string(e.what()).find(pool), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(engine.add(2, greedy_request(some_tokens(20, kVocab, 1), SpecMode::kOff, 12)));
  engine.run_until_idle();
  EXPECT_EQ(engine.take_finished().at(0).tokens.size(), 12u);
}

INSTANTIATE_TEST_SUITE_P(KvDtypesAndWindows, EngineOnAPagedCache,
                         ::testing::Values(PagedCase{DType::kF32, false}, PagedCase{DType::kBF16, false},
                                           PagedCase{DType::kF32, true}, PagedCase{DType::kBF16, true}),
                         [](const ::testing::TestParamInfo<PagedCase>& c) {
                           return std::string(c.param.dtype == DType::kBF16 ? "Bf16" : "Float32") +
                                  (c.param.windowed ? "SlidingWindow" : "");
                         });

// A prompt longer than a pass takes (KvCache::kMaxRowsPerPass) on a gpt-oss model with a window
// of 12 and blocks of 8: the prefill runs in parts, each giving back the sliding layers' blocks
// its window left, and decoding holds the full layers' blocks and two or three of the sliding
// layers', not a second copy of the sequence; the output is the whole-length caches'.
TEST(SlidingWindowPagedCache, ASequenceHoldsItsSlidingLayersWindowOnly) {
  DFlashTestPair pair(gpt_oss_f32_target(43, 4, 12), TinyDrafterSpec{.layers = 1, .block_size = 8, .seed = 44});
  const SequenceRequest request = greedy_request(some_tokens(300, kVocab, 3), SpecMode::kOff, 20);
  std::unique_ptr<PagedKvStore> paged = pair.target.model->make_paged_store(120, 8);
  Engine engine(*pair.target.model, nullptr, {.max_slots = 1, .paged_cache = paged.get()});
  engine.add(0, request);
  int64_t steps = 0, most_used = 0;
  while (!engine.idle()) {
    engine.step();
    const int64_t used = paged->blocks().stats().used;
    most_used = std::max(most_used, used);
    // After the prefill, before each pass: positions [L - 11, L], at most 3 blocks of 8.
    if (++steps > 1 && !engine.idle()) {
      EXPECT_LE(used, (300 + 20 + 7) / 8 + 3) << "step " << steps;
    }
  }
  EXPECT_LT(most_used, 2 * ((300 + 7) / 8)) << "the prefill's parts gave the window's past back";
  const std::vector<int32_t> plain = run_engine(*pair.target.model, nullptr, {request}, 1).at(0);
  EXPECT_EQ(engine.take_finished().at(0).tokens, plain);
}

// --kv-cache-dtype: the two names, a clear error for any other, and a bf16 position half the bytes.
TEST(KvCacheDtype, NamesTheTwoTypesAndHalvesTheBytesOfAPosition) {
  EXPECT_EQ(parse_kv_cache_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(parse_kv_cache_dtype("float32"), DType::kF32);
  EXPECT_EQ(kv_cache_dtype_name(DType::kBF16), "bf16");
  for (const char* bad : {"fp16", "BF16", "", "float"}) {
    try {
      parse_kv_cache_dtype(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("bf16 or float32"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(2 * PagedKvStore::bytes_per_block(28, 8, 128, 16, DType::kBF16),
            PagedKvStore::bytes_per_block(28, 8, 128, 16, DType::kF32));
  EXPECT_EQ(PagedKvStore::bytes_per_block(28, 8, 128, 1, DType::kBF16), 112 * 1024) << "Qwen3-0.6B: 112 KiB a position";
}

TEST(PagedKvStore, ItsStoresComeFromTheCachePoolAndARunTooShortIsAClearError) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const int64_t block_bytes = PagedKvStore::bytes_per_block(3, 2, 16, 8);
  EXPECT_EQ(block_bytes, 2 * 3 * 8 * 2 * 16 * 4);
  CachePool pool(*backend, 10 * block_bytes);
  {
    PagedKvStore store(*backend, 3, 2, 16, 10, 8, &pool);
    EXPECT_EQ(pool.free_bytes(), 0);
    EXPECT_EQ(store.keys(2).dim(0), 80);
    EXPECT_EQ(store.values(0).shape(), (Shape{80, 2, 16}));
  }
  EXPECT_EQ(pool.free_bytes(), pool.capacity_bytes());
  try {
    PagedKvStore(*backend, 3, 2, 16, 11, 8, &pool);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("11 blocks"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PagedKvStore(*backend, 3, 2, 16, 0, 8), Error);
}

// A cache truncated into a block it shares copies the kept rows to a block of its own first, so
// what it writes next never reaches the other sequence's keys.
TEST(PagedKvStore, TruncatingIntoASharedBlockCopiesItFirst) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  PagedKvStore store(*backend, 2, 1, 8, 6, 4);
  for (int64_t layer = 0; layer < 2; ++layer) {
    float* k = store.keys(layer).data<float>();
    float* v = store.values(layer).data<float>();
    for (int64_t i = 0; i < 6 * 4 * 8; ++i) k[i] = static_cast<float>(i + 1000 * layer), v[i] = -k[i];
  }
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  KvCache writer(store, 16);
  ASSERT_TRUE(writer.try_reserve(9));
  writer.commit(9);
  writer.commit_full_blocks(tokens);
  ASSERT_EQ(writer.registered_blocks(), 2);
  KvCache reader(store, 16);
  reader.adopt_prefix(tokens);
  ASSERT_EQ(reader.length(), 8);
  ASSERT_EQ(reader.block_ids()[1], writer.block_ids()[1]) << "the second block is shared";
  reader.truncate(6);
  const BlockId own = reader.block_ids()[1], shared = writer.block_ids()[1];
  ASSERT_NE(own, shared) << "the kept tail is a copy";
  EXPECT_EQ(reader.block_ids()[0], writer.block_ids()[0]);
  for (int64_t layer = 0; layer < 2; ++layer) {
    for (Tensor* t : {&store.keys(layer), &store.values(layer)}) {
      const float* rows = t->data<float>();
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t d = 0; d < 8; ++d) {
          EXPECT_EQ(rows[(own * 4 + r) * 8 + d], rows[(shared * 4 + r) * 8 + d]) << "layer " << layer << " row " << r;
        }
      }
    }
  }
  EXPECT_EQ(reader.slot(5), own * 4 + 1);
}

}  // namespace
}  // namespace flashq::testing
