// DFlashProposer's bookkeeping of committed tokens: lazy injection, and the ring of recent taps
// a sequence keeps while it does not draft. Checked against the drafter driven by hand.
#include "worker/engine/dflash_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "tests/engine/dflash_test_pair.h"
#include "worker/engine/sampler.h"

namespace flashq::testing {
namespace {

constexpr int64_t kRing = DFlashProposer::kRecentRows;

// A prompt and then `steps` greedy tokens of the target, one pass each, with every pass's taps
// copied to the host (they are views into the model's workspace).
struct TargetRun {
  std::vector<int32_t> prompt;
  std::vector<std::vector<float>> taps;  // per pass: rows x tap columns
  std::vector<int32_t> chunk_lengths;     // tokens per pass
  int32_t next_token = 0;                 // chosen after the last pass, not yet run
};

TargetRun run_target(DFlashTestPair& pair, int64_t prompt_length, int64_t steps) {
  TargetRun run;
  run.prompt.resize(static_cast<size_t>(prompt_length));
  std::iota(run.prompt.begin(), run.prompt.end(), 7);
  TargetModel& model = *pair.target.model;
  KvCache cache = model.make_cache(prompt_length + steps + 1);
  std::vector<int32_t> tokens = run.prompt;
  for (int64_t step = 0; step <= steps; ++step) {
    SequenceChunk chunk{tokens, &cache};
    ForwardOutput out = model.forward({&chunk, 1}, {.logits = LogitRows::kLastOfEachChunk,
                                                    .tap_layers = pair.proposer->tap_layers()});
    run.taps.push_back(to_host(*pair.target.backend, out.taps));
    run.chunk_lengths.push_back(static_cast<int32_t>(tokens.size()));
    const std::vector<float> logits = to_host(*pair.target.backend, out.logits);
    tokens = {argmax(logits)};
  }
  run.next_token = tokens[0];
  return run;
}

Tensor upload_rows(Backend& backend, const std::vector<float>& rows, int64_t columns) {
  Tensor t = backend.allocate(DType::kF32, {static_cast<int64_t>(rows.size()) / columns, columns});
  backend.copy_from_host(rows.data(), t);
  return t;
}

class DFlashProposerTest : public ::testing::Test {
 protected:
  DFlashProposerTest() : pair(f32_target(31), TinyDrafterSpec{.layers = 1, .block_size = 8, .seed = 32}) {
    pair.proposer->keep_logits(true);
  }

  // Feeds every pass of `run` to the proposer (those in `without_taps` without their hidden
  // states), then drafts one block after the last.
  std::vector<float> propose_after(const TargetRun& run, int64_t block, const std::set<size_t>& without_taps = {}) {
    std::unique_ptr<ProposerState> state = pair.proposer->start_sequence(256);
    int64_t position = 0;
    for (size_t pass = 0; pass < run.taps.size(); ++pass) {
      const int64_t n = run.chunk_lengths[pass];
      std::vector<int32_t> tokens(static_cast<size_t>(n), 0);
      if (without_taps.contains(pass)) {
        Observation o{state.get(), tokens, position, Tensor()};
        pair.proposer->observe_without_taps({&o, 1});
      } else {
        Tensor taps = upload_rows(*pair.target.backend, run.taps[pass], pair.drafter->tap_columns());
        Observation o{state.get(), tokens, position, taps};
        pair.proposer->observe({&o, 1});
      }
      position += n;
    }
    std::vector<int32_t> draft;
    ProposalRequest request{state.get(), run.next_token, position, block, &draft};
    pair.proposer->propose({&request, 1});
    return pair.proposer->last_logits();
  }

  // The drafter by hand: a context of the prompt and the given passes (at their own positions).
  std::vector<float> draft_by_hand(const TargetRun& run, const std::vector<size_t>& passes, int64_t block) {
    KvCache context = pair.drafter->make_context_cache(256);
    std::vector<int64_t> first_position(run.taps.size() + 1, 0);
    for (size_t pass = 0; pass < run.taps.size(); ++pass) {
      first_position[pass + 1] = first_position[pass] + run.chunk_lengths[pass];
    }
    for (size_t pass : passes) {
      Tensor taps = upload_rows(*pair.target.backend, run.taps[pass], pair.drafter->tap_columns());
      ContextChunk chunk{taps, &context, first_position[pass]};
      pair.drafter->inject({&chunk, 1});
    }
    DraftBlock request{run.next_token, block, &context, first_position.back()};
    return to_host(*pair.target.backend, pair.drafter->draft({&request, 1}));
  }

  DFlashTestPair pair;
};

void expect_close(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_NEAR(actual[i], expected[i], 1e-4f) << "logit " << i;
}

// Fewer committed tokens than the ring holds: the context is complete, as if injected each step.
TEST_F(DFlashProposerTest, LazyInjectionDraftsAsFromTheWholeContext) {
  const TargetRun run = run_target(pair, 20, kRing - 3);
  std::vector<size_t> every_pass(run.taps.size());
  std::iota(every_pass.begin(), every_pass.end(), 0);
  expect_close(propose_after(run, 8), draft_by_hand(run, every_pass, 8));
}

// A sequence that did not draft for longer than the ring: the prompt (injected as it came, being
// longer than the ring) and its latest kRecentRows tokens; the positions between are skipped.
TEST_F(DFlashProposerTest, SequenceThatStoppedDraftingKeepsThePromptAndItsRecentTokens) {
  const int64_t steps = 3 * kRing + 5;  // the ring wraps several times
  const TargetRun run = run_target(pair, kRing + 4, steps);
  std::vector<size_t> kept{0};
  for (size_t pass = run.taps.size() - kRing; pass < run.taps.size(); ++pass) kept.push_back(pass);
  const std::vector<float> proposed = propose_after(run, 8);
  expect_close(proposed, draft_by_hand(run, kept, 8));

  std::vector<size_t> every_pass(run.taps.size());
  std::iota(every_pass.begin(), every_pass.end(), 0);
  const std::vector<float> whole = draft_by_hand(run, every_pass, 8);
  float largest_difference = 0;
  for (size_t i = 0; i < whole.size(); ++i) largest_difference = std::max(largest_difference, std::abs(whole[i] - proposed[i]));
  EXPECT_GT(largest_difference, 1e-3f) << "the dropped positions were not dropped";
}

// Tokens observed without hidden states (auto where no drafting could pay): the context skips
// them, and the recent taps before them are dropped too; those after them are kept.
TEST_F(DFlashProposerTest, TokensObservedWithoutTapsAreSkippedWithTheRecentTapsBeforeThem) {
  const TargetRun run = run_target(pair, 20, kRing - 3);  // pass 0 (the prompt) is injected at once
  const std::set<size_t> without_taps{6, 7, 8, 9};
  std::vector<size_t> kept{0};
  for (size_t pass = 10; pass < run.taps.size(); ++pass) kept.push_back(pass);
  expect_close(propose_after(run, 8, without_taps), draft_by_hand(run, kept, 8));
}

TEST_F(DFlashProposerTest, ObservationsWithoutTapsMustFollowTooAndMoveThePositionOn) {
  std::unique_ptr<ProposerState> state = pair.proposer->start_sequence(64);
  std::vector<int32_t> tokens{1, 2};
  Observation skipped{state.get(), tokens, 0, Tensor()};
  pair.proposer->observe_without_taps({&skipped, 1});
  Observation gap{state.get(), tokens, 5, Tensor()};
  EXPECT_THROW(pair.proposer->observe_without_taps({&gap, 1}), Error);
  std::vector<int32_t> draft;
  ProposalRequest stale{state.get(), 3, 0, 4, &draft};
  EXPECT_THROW(pair.proposer->propose({&stale, 1}), Error) << "a draft must start after the skipped tokens";
  ProposalRequest next{state.get(), 3, 2, 4, &draft};
  EXPECT_NO_THROW(pair.proposer->propose({&next, 1}));
  EXPECT_EQ(draft.size(), 3u);
}

TEST_F(DFlashProposerTest, ObservationsMustFollowEachOther) {
  std::unique_ptr<ProposerState> state = pair.proposer->start_sequence(64);
  Tensor taps = pair.target.backend->allocate(DType::kF32, {2, pair.drafter->tap_columns()});
  std::vector<int32_t> tokens{1, 2};
  Observation first{state.get(), tokens, 0, taps};
  pair.proposer->observe({&first, 1});
  Observation gap{state.get(), tokens, 5, taps};
  EXPECT_THROW(pair.proposer->observe({&gap, 1}), Error);
}

}  // namespace
}  // namespace flashq::testing
