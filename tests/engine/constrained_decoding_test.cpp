// Constrained decoding (token_constraint.h) with and without speculation: every output token is
// one the constraint allows, the output ends only where it may, the drafter's drafts keep to it
// position by position, and at temperature 0 constrained DFlash equals constrained target-only
// decoding token for token, alone and batched with unconstrained sequences (which stay exactly
// as they are without the constrained ones).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/engine/dflash_test_pair.h"
#include "tests/engine/modulo_constraint.h"
#include "tests/engine/replay_proposer.h"
#include "worker/engine/token_mask.h"

namespace flashq::testing {
namespace {

class ConstrainedDecoding : public ::testing::Test {
 protected:
  ConstrainedDecoding() : pair_(f32_target(41), {.layers = 1, .block_size = 8, .seed = 41}) {}

  SequenceRequest request(uint32_t seed, SpecMode spec, bool constrained, int64_t max_tokens = 40) const {
    SequenceRequest r;
    r.generation.prompt_tokens = some_tokens(6 + seed % 5, 459, seed);
    r.generation.max_tokens = max_tokens;
    r.spec = spec;
    r.block_size = spec == SpecMode::kOff ? 0 : 8;
    if (constrained) r.constraint = std::make_shared<ModuloConstraint>();
    return r;
  }

  std::vector<FinishedSequence> run(std::vector<SequenceRequest> requests, std::vector<TraceRecord>* trace = nullptr) {
    EngineOptions options{.max_slots = static_cast<int64_t>(requests.size())};
    if (trace) options.on_trace = [trace](const TraceRecord& r) { trace->push_back(r); };
    Engine engine(*pair_.target.model, pair_.proposer.get(), options);
    for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
    engine.run_until_idle();
    std::vector<FinishedSequence> done = engine.take_finished();
    std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return done;
  }

  std::span<const int32_t> eos() const { return pair_.target.model->config().eos_token_ids; }

  DFlashTestPair pair_;
};

TEST_F(ConstrainedDecoding, EveryTokenIsAllowedAndTheOutputEndsOnlyWhereItMay) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    for (SpecMode spec : {SpecMode::kOff, SpecMode::kDflash}) {
      const FinishedSequence done = run({request(seed, spec, true)}).at(0);
      ASSERT_GE(static_cast<int64_t>(done.tokens.size()), ModuloConstraint::kEndFrom) << "seed " << seed;
      ASSERT_LE(static_cast<int64_t>(done.tokens.size()), ModuloConstraint::kLength) << "seed " << seed;
      for (size_t k = 0; k < done.tokens.size(); ++k) {
        EXPECT_TRUE(ModuloConstraint::allows(static_cast<int64_t>(k), done.tokens[k])) << "seed " << seed << " at " << k;
      }
      EXPECT_EQ(done.finish_reason, FinishReason::kStop) << "ended by an eos the constraint allowed";
    }
  }
}

TEST_F(ConstrainedDecoding, DraftsKeepToTheConstraintPositionByPosition) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const SequenceRequest r = request(seed, SpecMode::kDflash, true);
    const auto prompt_length = static_cast<int64_t>(r.generation.prompt_tokens.size());
    std::vector<TraceRecord> trace;
    run({r}, &trace);
    ASSERT_FALSE(trace.empty());
    for (const TraceRecord& step : trace) {
      // The draft's first token follows x, the output token at position start - prompt_length.
      int64_t position = step.start - prompt_length + 1;
      for (int32_t token : step.draft) {
        const bool ends = std::find(eos().begin(), eos().end(), token) != eos().end();
        if (ends) {
          EXPECT_GE(position, ModuloConstraint::kEndFrom) << "seed " << seed << ": an eos drafted too early";
          break;  // the rest repeat it
        }
        EXPECT_TRUE(ModuloConstraint::allows(position, token)) << "seed " << seed << " draft token at " << position;
        ++position;
      }
    }
  }
}

TEST_F(ConstrainedDecoding, GreedyDflashEqualsGreedyTargetOnlyAloneAndInAMixedBatch) {
  std::vector<SequenceRequest> off, dflash, mixed_alone;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const bool constrained = seed % 2 == 1;
    off.push_back(request(seed, SpecMode::kOff, constrained));
    dflash.push_back(request(seed, seed % 3 == 0 ? SpecMode::kAuto : SpecMode::kDflash, constrained));
  }
  std::vector<std::vector<int32_t>> want;
  for (const SequenceRequest& r : off) want.push_back(run({r}).at(0).tokens);
  for (size_t i = 0; i < dflash.size(); ++i) {
    EXPECT_EQ(run({dflash[i]}).at(0).tokens, want[i]) << "alone, sequence " << i;
  }
  for (SequenceRequest& r : dflash) {
    if (r.constraint) r.constraint = std::make_shared<ModuloConstraint>();  // fresh state
  }
  const std::vector<FinishedSequence> together = run(dflash);
  for (size_t i = 0; i < together.size(); ++i) EXPECT_EQ(together[i].tokens, want[i]) << "batched, sequence " << i;
}

// Drafts that are mostly right (the constrained continuation replayed, some positions wrong, which
// the constraint forbids): the target accepts runs of them, each verification row masked at the
// state the draft reached, and the output is still the constrained target-only one.
TEST_F(ConstrainedDecoding, AcceptedDraftsAreVerifiedAtTheirOwnStates) {
  const TargetModel& model = *pair_.target.model;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const SequenceRequest plain = request(seed, SpecMode::kOff, true);
    const FinishedSequence want = run({plain}).at(0);
    ReplayScript script{plain.generation.prompt_tokens, {}};
    script.tokens.insert(script.tokens.end(), want.tokens.begin(), want.tokens.end());
    for (int64_t p = 0; p < static_cast<int64_t>(script.tokens.size()); p += 5) script.wrong_positions.insert(p);
    ReplayProposer proposer({script}, {.block_size = 4, .vocab = model.config().vocab_size});
    std::vector<TraceRecord> trace;
    Engine engine(*pair_.target.model, &proposer,
                  {.max_slots = 1, .on_trace = [&](const TraceRecord& r) { trace.push_back(r); }});
    SequenceRequest speculative = request(seed, SpecMode::kDflash, true);
    speculative.block_size = 4;
    engine.add(0, speculative);
    engine.run_until_idle();
    EXPECT_EQ(engine.take_finished().at(0).tokens, want.tokens) << "seed " << seed;
    int64_t accepted = 0;
    for (const TraceRecord& r : trace) accepted += r.accepted;
    EXPECT_GT(accepted, 2) << "seed " << seed << ": runs of drafts must be accepted";
  }
}

// Jump-forward: the tokens a constraint forces are verified in one pass after the sequence's token
// (target only, or where no draft is made), always accepted, counted in no speculation figure;
// the output is the one decoding them one pass each gives.
TEST_F(ConstrainedDecoding, ForcedRunsTakeOnePassAndChangeNothing) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SequenceRequest r = request(seed, SpecMode::kOff, false);
    r.constraint = std::make_shared<ModuloConstraint>(/*forcing=*/true);
    std::vector<FinishedSequence> one_by_one, jumped;
    {
      Engine engine(*pair_.target.model, nullptr, {.max_slots = 1, .jump_forward = false});
      engine.add(0, r);
      engine.run_until_idle();
      one_by_one = engine.take_finished();
    }
    r.constraint = std::make_shared<ModuloConstraint>(/*forcing=*/true);
    std::vector<TraceRecord> trace;
    Engine engine(*pair_.target.model, nullptr,
                  {.max_slots = 1, .on_trace = [&](const TraceRecord& t) { trace.push_back(t); }});
    engine.add(0, r);
    engine.run_until_idle();
    jumped = engine.take_finished();
    const FinishedSequence& a = one_by_one.at(0);
    const FinishedSequence& b = jumped.at(0);
    EXPECT_EQ(b.tokens, a.tokens) << "seed " << seed;
    ASSERT_GT(a.tokens.size(), static_cast<size_t>(ModuloConstraint::kForcedTo));
    for (int64_t k = ModuloConstraint::kForcedFrom; k < ModuloConstraint::kForcedTo; ++k) {
      EXPECT_EQ(b.tokens[static_cast<size_t>(k)], ModuloConstraint::forced_at(k));
    }
    const int64_t forced = ModuloConstraint::kForcedTo - ModuloConstraint::kForcedFrom;
    EXPECT_EQ(b.spec_stats.target_passes, a.spec_stats.target_passes - forced) << "the forced run took one pass";
    EXPECT_EQ(b.spec_stats.draft_steps, 0);
    EXPECT_TRUE(trace.empty()) << "a forced run is no draft";
  }
}

TEST_F(ConstrainedDecoding, IgnoreEosWithAConstraintIsRefused) {
  SequenceRequest r = request(1, SpecMode::kOff, true);
  r.generation.ignore_eos = true;
  Engine engine(*pair_.target.model, nullptr, {.max_slots = 1});
  try {
    engine.add(0, r);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ignore_eos"), std::string::npos) << e.what();
  }
}

TEST(TokenMask, AppliesTheConstraintAndAllowsEndIdsOnlyWhereItMayEndOrIsStuck) {
  ModuloConstraint constraint;
  TokenMask mask(512);
  const std::vector<int32_t> ends = {510};
  mask.fill(constraint, ends);
  EXPECT_TRUE(mask.allows(0));
  EXPECT_FALSE(mask.allows(1));
  EXPECT_FALSE(mask.allows(510)) << "the output may not end yet";
  EXPECT_FALSE(mask.allows(-1));
  EXPECT_FALSE(mask.allows(512));
  std::vector<float> logits(515, 1.0f);  // three padding rows past the vocabulary
  mask.apply(logits);
  EXPECT_EQ(logits[3], 1.0f);
  EXPECT_TRUE(std::isinf(logits[4]) && logits[4] < 0);
  EXPECT_TRUE(std::isinf(logits[513]) && logits[513] < 0);
  for (int32_t k = 0; k < ModuloConstraint::kLength; ++k) constraint.advance(k % 3);
  mask.fill(constraint, ends);
  EXPECT_TRUE(mask.allows(510)) << "nothing else is allowed: the output ends";
  EXPECT_FALSE(mask.allows(0));
}

}  // namespace
}  // namespace flashq::testing
