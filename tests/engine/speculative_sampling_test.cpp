// Speculative sampling keeps the target's distribution exactly (docs/dflash.md §2.4): accepting a draft
// token d with probability p(d), and on rejection drawing from p without d, emits each token with
// probability p whatever was drafted. Checked by chi-square tests at p = 0.001 on fixed seeds, so
// every run draws the same numbers and the outcome is deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/engine/chi_square.h"
#include "tests/engine/modulo_constraint.h"
#include "tests/engine/replay_proposer.h"
#include "tests/model/tiny_model.h"
#include "worker/engine/acceptance.h"
#include "worker/engine/engine.h"
#include "worker/serving/generate.h"

namespace flashq::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// accept_speculative_sampling on hand-made rows over a vocabulary of 5.

constexpr int64_t kVocab = 5;
constexpr int kDraws = 20000;

// Logits whose softmax at temperature 1 is exactly `probs`.
std::vector<float> logits_of(const std::vector<std::vector<double>>& rows) {
  std::vector<float> logits;
  for (const auto& row : rows) {
    for (double p : row) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -1e30f);
  }
  return logits;
}

const std::vector<double> kP0 = {0.40, 0.25, 0.20, 0.10, 0.05};
const std::vector<double> kP1 = {0.10, 0.30, 0.30, 0.20, 0.10};
const std::vector<double> kP2 = {0.20, 0.20, 0.20, 0.20, 0.20};

SamplingParams at_temperature_one(uint64_t seed) { return {.temperature = 1.0f, .seed = seed}; }

// The first token a block emits: the first draft token if it was accepted, else the replacement.
int32_t first_emitted(const std::vector<int32_t>& draft, const Acceptance& a) {
  return a.accepted >= 1 ? draft[0] : a.bonus;
}
int32_t second_emitted(const std::vector<int32_t>& draft, const Acceptance& a) {
  return a.accepted >= 2 ? draft[1] : a.bonus;
}

TEST(SpeculativeSampling, FirstTokenFollowsTheTargetWhateverTheDraft) {
  const std::vector<float> logits = logits_of({kP0, kP1, kP2});
  for (int32_t drafted = 0; drafted < kVocab; ++drafted) {
    Sampler sampler(at_temperature_one(1000 + static_cast<uint64_t>(drafted)));
    const std::vector<int32_t> draft = {drafted, 2};
    std::vector<int64_t> counts(kVocab, 0);
    for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(first_emitted(draft, accept_speculative_sampling(draft, logits, kVocab, sampler)))];
    EXPECT_LT(chi_square_goodness_of_fit(counts, kP0), chi_square_critical_0_001(kVocab - 1))
        << "draft token " << drafted << ": first tokens " << ::testing::PrintToString(counts) << " in " << kDraws
        << " draws do not follow p_0";
  }
}

TEST(SpeculativeSampling, AcceptsADraftTokenWithTheTargetsProbabilityOfIt) {
  const std::vector<float> logits = logits_of({kP0, kP1, kP2});
  for (int32_t drafted = 0; drafted < kVocab; ++drafted) {
    Sampler sampler(at_temperature_one(2000 + static_cast<uint64_t>(drafted)));
    const std::vector<int32_t> draft = {drafted, 2};
    int64_t accepted = 0;
    for (int i = 0; i < kDraws; ++i) accepted += accept_speculative_sampling(draft, logits, kVocab, sampler).accepted >= 1;
    const double p = kP0[static_cast<size_t>(drafted)];
    const double z = (static_cast<double>(accepted) - kDraws * p) / std::sqrt(kDraws * p * (1 - p));
    EXPECT_LT(std::abs(z), 3.29) << "draft token " << drafted << " accepted " << accepted << " times in " << kDraws
                                 << ", expected about " << kDraws * p;
  }
}

TEST(SpeculativeSampling, SecondTokenFollowsTheNextRowOnceTheFirstIsAccepted) {
  const std::vector<float> logits = logits_of({kP0, kP1, kP2});
  for (int32_t drafted = 0; drafted < kVocab; ++drafted) {
    Sampler sampler(at_temperature_one(3000 + static_cast<uint64_t>(drafted)));
    const std::vector<int32_t> draft = {0, drafted};
    std::vector<int64_t> counts(kVocab, 0);
    for (int i = 0; i < kDraws; ++i) {
      const Acceptance a = accept_speculative_sampling(draft, logits, kVocab, sampler);
      if (a.accepted >= 1) ++counts[static_cast<size_t>(second_emitted(draft, a))];
    }
    EXPECT_LT(chi_square_goodness_of_fit(counts, kP1), chi_square_critical_0_001(kVocab - 1))
        << "second draft token " << drafted << ": second tokens " << ::testing::PrintToString(counts)
        << " do not follow p_1";
  }
}

TEST(SpeculativeSampling, BonusAfterAFullBlockFollowsTheLastRow) {
  const std::vector<float> logits = logits_of({kP0, kP1, kP2});
  Sampler sampler(at_temperature_one(4000));
  const std::vector<int32_t> draft = {0, 1};
  std::vector<int64_t> counts(kVocab, 0);
  for (int i = 0; i < kDraws; ++i) {
    const Acceptance a = accept_speculative_sampling(draft, logits, kVocab, sampler);
    if (a.accepted == 2) ++counts[static_cast<size_t>(a.bonus)];
  }
  EXPECT_LT(chi_square_goodness_of_fit(counts, kP2), chi_square_critical_0_001(kVocab - 1))
      << "bonus tokens " << ::testing::PrintToString(counts) << " do not follow p_2";
}

TEST(SpeculativeSampling, FollowsTheTruncatedTargetUnderTopKAndTopP) {
  const std::vector<float> logits = logits_of({kP0, kP1, kP2});
  struct Cut {
    SamplingParams params;
    std::vector<double> p0;  // kP0 restricted and renormalised
  };
  const std::vector<Cut> cuts = {
      {{.temperature = 1.0f, .top_k = 2, .seed = 5000}, {0.40 / 0.65, 0.25 / 0.65, 0, 0, 0}},
      {{.temperature = 1.0f, .top_p = 0.8f, .seed = 5001}, {0.40 / 0.85, 0.25 / 0.85, 0.20 / 0.85, 0, 0}},
  };
  for (const Cut& cut : cuts) {
    for (int32_t drafted = 0; drafted < kVocab; ++drafted) {
      Sampler sampler(cut.params);
      const std::vector<int32_t> draft = {drafted, 2};
      std::vector<int64_t> counts(kVocab, 0);
      for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(first_emitted(draft, accept_speculative_sampling(draft, logits, kVocab, sampler)))];
      for (size_t t = 0; t < counts.size(); ++t) {
        if (cut.p0[t] == 0) {
          EXPECT_EQ(counts[t], 0) << "token " << t << " is cut off, yet emitted (draft " << drafted << ")";
        }
      }
      EXPECT_LT(chi_square_goodness_of_fit(counts, cut.p0), chi_square_critical_0_001(support_size(cut.p0) - 1))
          << "top_k " << cut.params.top_k << " top_p " << cut.params.top_p << ", draft token " << drafted
          << ": first tokens " << ::testing::PrintToString(counts);
    }
  }
}

TEST(SpeculativeSampling, WithoutADraftIsOneOrdinarySample) {
  const std::vector<float> logits = logits_of({kP0});
  Sampler speculative(at_temperature_one(6000));
  Sampler ordinary(at_temperature_one(6000));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(accept_speculative_sampling({}, logits, kVocab, speculative).bonus, ordinary.sample(logits)) << "draw " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// End to end: the engine's sampled output with speculation has the distribution of plain sampling,
// on a Qwen3 target, a Llama one (attention and MLP biases, Llama 3 RoPE scaling) and a hybrid
// Qwen3.5 one (its recurrent state rolled back with every rejected draft).

// Drafts what the target itself would choose greedily after the committed prefix, running a second
// copy of the target (its own caches) for all sequences together: a good drafter, so at a low
// temperature many draft tokens are accepted and many rejected, exercising both branches of the
// acceptance rule.
class GreedySelfProposer final : public Proposer {
 public:
  GreedySelfProposer(TargetModel& target_copy, int64_t block_size) : target_(target_copy), block_size_(block_size) {}

  int64_t max_block_size() const override { return block_size_; }
  // One tap layer, though none is needed, so that this test does not depend on how the engine
  // serves a proposer without taps (Verification.ServesAProposerThatNeedsNoHiddenStates does).
  std::vector<int64_t> tap_layers() const override { return {0}; }
  std::unique_ptr<ProposerState> start_sequence(int64_t max_length) override {
    return std::make_unique<State>(target_, max_length);
  }

  void observe(std::span<const Observation> observations) override {
    for (const Observation& o : observations) {
      State& state = state_of(o.state);
      EXPECT_EQ(o.first_position, static_cast<int64_t>(state.committed.size())) << "observations must be contiguous";
      state.committed.insert(state.committed.end(), o.tokens.begin(), o.tokens.end());
    }
  }

  // Pass 1 runs what each cache lacks of the committed tokens, then the last token; each later pass
  // runs the previous draft token. Draft rows left in a cache are cut at the next proposal, once
  // the engine has said which of them were committed.
  void propose(std::span<const ProposalRequest> requests) override {
    std::vector<std::vector<int32_t>> pending(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const ProposalRequest& r = requests[i];
      State& state = state_of(r.state);
      EXPECT_EQ(r.start, static_cast<int64_t>(state.committed.size())) << "a proposal starts after the committed tokens";
      // A recurrent state cannot be cut back past its last pass: a hybrid target's copy starts over.
      if (state.cache->recurrent() != nullptr && state.cache->length() > r.start) state.restart(target_);
      state.cache->truncate(std::min(state.cache->length(), r.start));
      pending[i].assign(state.committed.begin() + state.cache->length(), state.committed.end());
      pending[i].push_back(r.last_token);
      r.draft->clear();
    }
    const int64_t vocab = target_.config().vocab_size;
    for (int64_t j = 1; j < block_size_; ++j) {
      std::vector<SequenceChunk> chunks;
      std::vector<size_t> drafting;
      for (size_t i = 0; i < requests.size(); ++i) {
        if (j < requests[i].block_size) {
          chunks.push_back({pending[i], state_of(requests[i].state).cache.get()});
          drafting.push_back(i);
        }
      }
      if (chunks.empty()) break;
      const std::vector<float> logits = to_host(target_.backend(), target_.forward(chunks, {}).logits);
      for (size_t k = 0; k < drafting.size(); ++k) {
        const int32_t token = argmax(std::span(logits).subspan(k * static_cast<size_t>(vocab), static_cast<size_t>(vocab)));
        requests[drafting[k]].draft->push_back(token);
        pending[drafting[k]] = {token};
      }
    }
  }

 private:
  struct State final : ProposerState {
    State(TargetModel& target, int64_t length) : max_length(length) { restart(target); }
    void restart(TargetModel& target) { cache = std::make_unique<KvCache>(target.make_cache(max_length)); }
    int64_t max_length;
    std::unique_ptr<KvCache> cache;
    std::vector<int32_t> committed;
  };
  static State& state_of(ProposerState* state) { return dynamic_cast<State&>(*state); }

  TargetModel& target_;
  int64_t block_size_;
};

class SpeculativeSamplingEndToEnd : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int64_t kBlock = 4;
  static constexpr int64_t kTokens = 1 + kBlock;  // the prefill's token, then one full block
  static constexpr int64_t kSequences = 1500;
  // The tiny random model's logits span about 5: at 0.2 a handful of tokens share most of the mass,
  // so the draft is accepted about 40% of the time and the frequent tokens give a sharp test.
  static constexpr float kTemperature = 0.2f;

  static TinyModelSpec spec(const std::string& family) {
    TinyModelSpec s;
    s.vocab = 301;  // the smallest make-tiny writes: 300 tokenizer ids and the padding row
    s.dtype = DType::kF32;
    s.seed = 23;
    if (family == "qwen3_5") {  // a hybrid: three Gated DeltaNet layers to one attention layer
      s.family = family;
      s.layers = 4;
    }
    if (family == "llama") {
      s.family = family;
      s.attention_bias = s.mlp_bias = true;
      s.rope_theta = 5e5;
      s.rope_scaling_factor = 8;  // with a short original context, so that the scaling is used
      s.original_max_position = 32;
    }
    return s;
  }
  SpeculativeSamplingEndToEnd()
      : tiny_(spec(GetParam())),
        tokenizer_(load_tokenizer(tiny_.dir.path())),
        target_copy_(load_target_model(tiny_.dir.path(), *tiny_.backend)) {}

  GenerationRequest sampled(uint64_t seed) const {
    return {.prompt_tokens = some_tokens(6, 250, 9),
            .max_tokens = kTokens,
            .sampling = {.temperature = kTemperature, .seed = seed},
            .ignore_eos = true};
  }

  // outputs[i] = the tokens of the sequence with seed first_seed + i.
  // With `constrained`, each sequence keeps to a ModuloConstraint of its own.
  std::vector<std::vector<int32_t>> run_many(Proposer* proposer, uint64_t first_seed,
                                             std::vector<TraceRecord>* trace = nullptr, bool constrained = false) {
    EngineOptions options{.max_slots = 64};
    if (trace) options.on_trace = [trace](const TraceRecord& r) { trace->push_back(r); };
    Engine engine(*tiny_.model, proposer, options);
    for (int64_t i = 0; i < kSequences; ++i) {
      SequenceRequest request{.generation = sampled(first_seed + static_cast<uint64_t>(i)),
                              .spec = proposer ? SpecMode::kDflash : SpecMode::kOff};
      if (constrained) {
        request.generation.ignore_eos = false;  // kTokens < ModuloConstraint::kEndFrom: no eos allowed
        request.constraint = std::make_shared<ModuloConstraint>();
      }
      engine.add(static_cast<uint64_t>(i), std::move(request));
    }
    engine.run_until_idle();
    std::vector<std::vector<int32_t>> outputs(static_cast<size_t>(kSequences));
    for (FinishedSequence& done : engine.take_finished()) outputs.at(done.id) = std::move(done.tokens);
    return outputs;
  }

  LoadedTinyModel tiny_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<TargetModel> target_copy_;
};

TEST_P(SpeculativeSamplingEndToEnd, SampledTokensHaveThePlainDistribution) {
  GreedySelfProposer proposer(*target_copy_, kBlock);
  // Disjoint seeds: the two samples are independent, so only their distributions can agree.
  const std::vector<std::vector<int32_t>> plain = run_many(nullptr, 1);
  std::vector<TraceRecord> trace;
  const std::vector<std::vector<int32_t>> speculative = run_many(&proposer, 1'000'001, &trace);

  int64_t drafted = 0, accepted = 0;
  for (const TraceRecord& r : trace) {
    drafted += static_cast<int64_t>(r.draft.size());
    accepted += r.accepted;
  }
  const double acceptance = static_cast<double>(accepted) / static_cast<double>(drafted);
  EXPECT_TRUE(acceptance > 0.2 && acceptance < 0.8)
      << "acceptance " << acceptance << ": both accepting and rejecting must be exercised";

  for (int64_t position = 1; position < kTokens; ++position) {
    std::vector<int32_t> a, b;
    for (const auto& out : plain) a.push_back(out.at(static_cast<size_t>(position)));
    for (const auto& out : speculative) b.push_back(out.at(static_cast<size_t>(position)));
    const Homogeneity h = chi_square_homogeneity(a, b, /*min_count=*/20, /*max_categories=*/30);
    ASSERT_GE(h.degrees_of_freedom, 3) << "output position " << position << ": too few categories for a test";
    EXPECT_LT(h.chi_square, chi_square_critical_0_001(h.degrees_of_freedom))
        << "output position " << position << ": speculative and plain sampling differ (chi-square " << h.chi_square
        << ", " << h.degrees_of_freedom << " degrees of freedom)";
  }
}

// Under a constraint the target's distribution is restricted to the allowed tokens and
// renormalised, row by row at the state the draft reaches: speculative sampling over those rows
// gives exactly plain sampling's constrained distribution, though the self-drafts (unconstrained)
// are often forbidden and rejected.
TEST_P(SpeculativeSamplingEndToEnd, ConstrainedSampledTokensHaveThePlainConstrainedDistribution) {
  GreedySelfProposer proposer(*target_copy_, kBlock);
  const std::vector<std::vector<int32_t>> plain = run_many(nullptr, 1, nullptr, /*constrained=*/true);
  std::vector<TraceRecord> trace;
  const std::vector<std::vector<int32_t>> speculative = run_many(&proposer, 1'000'001, &trace, /*constrained=*/true);

  int64_t accepted = 0;
  for (const TraceRecord& r : trace) accepted += r.accepted;
  EXPECT_GT(accepted, kSequences / 20) << "drafts must be accepted too";
  for (int64_t position = 0; position < kTokens; ++position) {
    std::vector<int32_t> a, b;
    for (const auto& out : plain) a.push_back(out.at(static_cast<size_t>(position)));
    for (const auto& out : speculative) b.push_back(out.at(static_cast<size_t>(position)));
    for (int32_t token : b) ASSERT_TRUE(ModuloConstraint::allows(position, token)) << "position " << position;
    if (position == 0) continue;  // the prefill's token: no draft verified it
    const Homogeneity h = chi_square_homogeneity(a, b, /*min_count=*/20, /*max_categories=*/30);
    ASSERT_GE(h.degrees_of_freedom, 3) << "output position " << position << ": too few categories for a test";
    EXPECT_LT(h.chi_square, chi_square_critical_0_001(h.degrees_of_freedom))
        << "output position " << position << ": constrained speculative and plain sampling differ (chi-square "
        << h.chi_square << ", " << h.degrees_of_freedom << " degrees of freedom)";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SpeculativeSamplingEndToEnd, ::testing::Values("qwen3", "llama", "qwen3_5"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
}  // namespace flashq::testing
