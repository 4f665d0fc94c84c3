// Log-probabilities with the output (token_logprobs.h): the target's raw distribution, so at
// temperature 0 the chosen token is its row's most likely one; taken from the verification rows
// under speculation, they equal plain decoding's bit for bit on the CPU (alone or batched);
// before any constraint's mask; a bad count is refused.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/engine/dflash_test_pair.h"
#include "tests/engine/modulo_constraint.h"
#include "tests/engine/replay_proposer.h"

namespace flashq::testing {
namespace {

struct Emitted {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
};

class Logprobs : public ::testing::Test {
 protected:
  Logprobs() : pair_(f32_target(43), {.layers = 1, .block_size = 8, .seed = 43}) {}

  SequenceRequest request(uint32_t seed, SpecMode spec, int32_t logprobs = 5) const {
    SequenceRequest r;
    r.generation.prompt_tokens = some_tokens(5 + seed % 4, 459, seed);
    r.generation.max_tokens = 24;
    r.generation.ignore_eos = true;
    r.generation.logprobs = logprobs;
    r.spec = spec;
    r.block_size = spec == SpecMode::kOff ? 0 : 6;
    return r;
  }

  std::vector<Emitted> run(const std::vector<SequenceRequest>& requests, Proposer* proposer,
                           int64_t* accepted = nullptr) {
    std::vector<Emitted> out(requests.size());
    EngineOptions options{.max_slots = static_cast<int64_t>(requests.size())};
    if (accepted) options.on_trace = [accepted](const TraceRecord& r) { *accepted += r.accepted; };
    options.on_event = [&](const StepEvent& e) {
      Emitted& o = out.at(e.id);
      if (requests[e.id].generation.logprobs >= 0) {
        EXPECT_EQ(e.logprobs.size(), e.token_ids.size());
      } else {
        EXPECT_TRUE(e.logprobs.empty());
      }
      o.tokens.insert(o.tokens.end(), e.token_ids.begin(), e.token_ids.end());
      o.logprobs.insert(o.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    };
    Engine engine(*pair_.target.model, proposer, options);
    for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
    engine.run_until_idle();
    return out;
  }

  DFlashTestPair pair_;
};

TEST_F(Logprobs, AtTemperatureZeroTheChosenTokenIsItsRowsMostLikely) {
  const Emitted e = run({request(1, SpecMode::kOff)}, nullptr).at(0);
  ASSERT_EQ(e.logprobs.size(), e.tokens.size());
  for (size_t k = 0; k < e.tokens.size(); ++k) {
    const TokenLogprobs& lp = e.logprobs[k];
    ASSERT_EQ(lp.top.size(), 5u);
    EXPECT_EQ(lp.top[0].token, e.tokens[k]) << "at " << k;
    EXPECT_EQ(lp.top[0].logprob, lp.logprob) << "at " << k;
    double mass = 0;
    for (size_t i = 0; i < lp.top.size(); ++i) {
      EXPECT_LE(lp.top[i].logprob, 0.0f);
      if (i > 0) {
        EXPECT_GE(lp.top[i - 1].logprob, lp.top[i].logprob);
      }
      mass += std::exp(lp.top[i].logprob);
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
}

TEST_F(Logprobs, SpeculationGivesPlainDecodingsLogprobsBitForBit) {
  std::vector<SequenceRequest> off, dflash;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    off.push_back(request(seed, SpecMode::kOff, seed == 4 ? -1 : static_cast<int32_t>(seed)));
    dflash.push_back(request(seed, SpecMode::kDflash, seed == 4 ? -1 : static_cast<int32_t>(seed)));
  }
  std::vector<Emitted> want;
  for (const SequenceRequest& r : off) want.push_back(run({r}, nullptr).at(0));
  // The drafter's drafts (rarely right), and the target's own continuation replayed with every
  // fourth draft token wrong (runs of drafts accepted: logprobs from rows past the first).
  std::vector<ReplayScript> scripts;
  for (size_t i = 0; i < off.size(); ++i) {
    ReplayScript script{off[i].generation.prompt_tokens, {}};
    script.tokens.insert(script.tokens.end(), want[i].tokens.begin(), want[i].tokens.end());
    for (int64_t p = 0; p < static_cast<int64_t>(script.tokens.size()); p += 4) script.wrong_positions.insert(p);
    scripts.push_back(std::move(script));
  }
  ReplayProposer replay(scripts, {.block_size = 6, .vocab = pair_.target.model->config().vocab_size});
  int64_t accepted = 0;
  for (Proposer* proposer : {static_cast<Proposer*>(pair_.proposer.get()), static_cast<Proposer*>(&replay)}) {
    const std::vector<Emitted> together = run(dflash, proposer, &accepted);
    for (size_t i = 0; i < off.size(); ++i) {
      EXPECT_EQ(together[i].tokens, want[i].tokens) << "sequence " << i;
      EXPECT_EQ(together[i].logprobs, want[i].logprobs) << "sequence " << i;
    }
  }
  EXPECT_GT(accepted, 10) << "runs of drafts must be accepted";
}

TEST_F(Logprobs, AConstrainedSequencesLogprobsAreTheRawDistributions) {
  SequenceRequest plain = request(2, SpecMode::kOff, 3);
  const Emitted unconstrained = run({plain}, nullptr).at(0);
  SequenceRequest constrained = plain;
  constrained.generation.ignore_eos = false;
  constrained.constraint = std::make_shared<ModuloConstraint>();
  const Emitted e = run({constrained}, nullptr).at(0);
  ASSERT_FALSE(e.tokens.empty());
  // The first row is the same prompt's: the same raw top tokens, whatever the mask allows.
  EXPECT_EQ(e.logprobs[0].top, unconstrained.logprobs[0].top);
  for (size_t k = 0; k < e.tokens.size(); ++k) EXPECT_LE(e.logprobs[k].logprob, e.logprobs[k].top[0].logprob);
}

TEST_F(Logprobs, ACountOutsideZeroToTwentyIsRefused) {
  Engine engine(*pair_.target.model, nullptr, {.max_slots = 1});
  for (int32_t bad : {-2, 21}) {
    try {
      engine.add(0, request(1, SpecMode::kOff, bad));
      FAIL() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("logprobs"), std::string::npos) << e.what();
    }
  }
}

TEST(RowLogprobsTest, NormalisesInLogSpaceAndBreaksTiesByLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -1000.0f};
  const RowLogprobs row = RowLogprobs::of(logits, 3);
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(-1000.0));
  EXPECT_NEAR(row.log_normaliser, z, 1e-5);
  ASSERT_EQ(row.top.size(), 3u);
  EXPECT_EQ(row.top[0].token, 1);
  EXPECT_EQ(row.top[1].token, 2);
  EXPECT_EQ(row.top[2].token, 0);
  EXPECT_NEAR(row.for_token(1.0f).logprob, 1.0 - z, 1e-5);
  EXPECT_TRUE(RowLogprobs::of(logits, 0).top.empty());
}

}  // namespace
}  // namespace flashq::testing
