// Recorded passes (Backend::capture, the CPU twin of CUDA graphs) in the drafter and in the
// whole engine: the drafter's draft passes recorded and replayed give the logits of draft passes
// run directly as its contexts grow, and an engine whose target and drafter both record gives the
// tokens and the drafts of one that does not.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "tests/engine/dflash_test_pair.h"

namespace flashq::testing {
namespace {

Tensor random_taps(Backend& backend, int64_t rows, int64_t columns, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(rows * columns));
  for (float& v : values) v = dist(rng);
  Tensor t = backend.allocate(DType::kF32, {rows, columns});
  backend.copy_from_host(values.data(), t);
  return t;
}

// Two sequences draft a block each step after 1-3 new context rows each: the same block sizes
// over the same context caches, so from the second step on the pass is replayed, while what it
// reads (ids, positions, store rows, key counts) changes every step. Halfway, the second
// sequence is replaced by a new one with a context cache of its own.
TEST(RecordedPasses, DraftPassesGiveWhatDirectPassesGive) {
  const TinyDrafterSpec drafter{.layers = 2, .block_size = 8, .seed = 52};
  DFlashTestPair direct(f32_target(51), drafter), recorded(f32_target(51), drafter);
  recorded.drafter->set_capture_passes(true);
  std::deque<KvCache> caches;  // every context made stays, so a new one never takes an old one's memory
  auto new_context = [&](DFlashTestPair& pair) { return &caches.emplace_back(pair.drafter->make_context_cache(128)); };
  std::vector<KvCache*> direct_contexts, recorded_contexts;
  for (int s = 0; s < 2; ++s) {
    direct_contexts.push_back(new_context(direct));
    recorded_contexts.push_back(new_context(recorded));
  }
  std::mt19937 rng(53);
  std::vector<int64_t> positions = {0, 0};
  for (int step = 0; step < 12; ++step) {
    if (step == 6) {
      direct_contexts[1] = new_context(direct);
      recorded_contexts[1] = new_context(recorded);
      positions[1] = 0;
    }
    std::vector<ContextChunk> direct_chunks, recorded_chunks;
    for (size_t s = 0; s < 2; ++s) {
      const int64_t rows = 1 + (step + static_cast<int64_t>(s)) % 3;
      Tensor taps = random_taps(*direct.target.backend, rows, direct.drafter->tap_columns(), rng);
      direct_chunks.push_back({taps, direct_contexts[s], positions[s]});
      recorded_chunks.push_back({taps, recorded_contexts[s], positions[s]});
      positions[s] += rows;
    }
    direct.drafter->inject(direct_chunks);
    recorded.drafter->inject(recorded_chunks);
    std::vector<DraftBlock> direct_blocks, recorded_blocks;
    for (size_t s = 0; s < 2; ++s) {
      const auto last = static_cast<int32_t>((step * 37 + static_cast<int>(s) * 11) % 400);
      direct_blocks.push_back({last, 8, direct_contexts[s], positions[s]});
      recorded_blocks.push_back({last, 8, recorded_contexts[s], positions[s]});
    }
    const std::vector<float> want = to_host(*direct.target.backend, direct.drafter->draft(direct_blocks));
    const std::vector<float> got = to_host(*recorded.target.backend, recorded.drafter->draft(recorded_blocks));
    ASSERT_EQ(got, want) << "step " << step;
  }
  EXPECT_GE(recorded.drafter->replayed_passes(), 8) << "the same blocks over the same contexts were not replayed";
  EXPECT_EQ(direct.drafter->replayed_passes(), 0);
}

TEST(RecordedPasses, EngineRecordingTargetAndDrafterGivesTheSameTokensAndDrafts) {
  const TinyDrafterSpec drafter{.layers = 1, .block_size = 8, .seed = 62};
  DFlashTestPair direct(f32_target(61), drafter), recorded(f32_target(61), drafter);
  recorded.target.model->set_capture_passes(true);
  recorded.drafter->set_capture_passes(true);
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back(greedy_request(some_tokens(5 + static_cast<size_t>(i), 459, static_cast<uint32_t>(70 + i)),
                                      i == 3 ? SpecMode::kOff : SpecMode::kDflash, 24));
  }
  std::vector<TraceRecord> direct_trace, recorded_trace;
  const auto want = run_engine(*direct.target.model, direct.proposer.get(), requests, 2,
                               &direct_trace);
  const auto got = run_engine(*recorded.target.model, recorded.proposer.get(), requests, 2,
                              &recorded_trace);
  EXPECT_EQ(got, want);
  ASSERT_EQ(recorded_trace.size(), direct_trace.size());
  for (size_t i = 0; i < direct_trace.size(); ++i) {
    EXPECT_EQ(recorded_trace[i].draft, direct_trace[i].draft) << "trace record " << i;
    EXPECT_EQ(recorded_trace[i].accepted, direct_trace[i].accepted) << "trace record " << i;
  }
  EXPECT_GT(recorded.target.model->replayed_passes(), 0);
  EXPECT_GT(recorded.drafter->replayed_passes(), 0);
}

}  // namespace
}  // namespace flashq::testing
