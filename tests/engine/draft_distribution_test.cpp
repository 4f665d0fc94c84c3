// Verification with the distribution the draft was drawn from (docs/dflash.md §7.4): a DFlash2
// draft comes from the candidate selector's q, and accepting d with probability min(1, p(d) / q(d)),
// resampling from max(0, p - q) on rejection, emits every token with the target's probability p.
// Checked by chi-square tests at p = 0.001 on fixed seeds: on hand-made rows (with the acceptance
// q buys over verifying the draft as a point mass), and end to end, a DFlash2 drafter's sampled
// output against plain sampling's, with `spec` dflash and auto.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/engine/chi_square.h"
#include "tests/engine/dflash_test_pair.h"
#include "worker/engine/acceptance.h"

namespace flashq::testing {
namespace {

constexpr int64_t kVocab = 5;
constexpr int kDraws = 20000;

const std::vector<double> kP0 = {0.40, 0.25, 0.20, 0.10, 0.05};
const std::vector<double> kP1 = {0.10, 0.30, 0.30, 0.20, 0.10};

std::vector<float> logits_of(const std::vector<std::vector<double>>& rows) {
  std::vector<float> logits;
  for (const auto& row : rows) {
    for (double p : row) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -1e30f);
  }
  return logits;
}

// q over four candidates, one of them a token the target gives 0.05 and q much more.
const DraftDistribution kQ = {{4, 0, 2, 1}, {0.45f, 0.15f, 0.30f, 0.10f}};

int32_t draw_from(const DraftDistribution& q, std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  double cumulative = 0.0;
  for (size_t i = 0; i < q.ids.size(); ++i) {
    cumulative += q.probs[i];
    if (u < cumulative) return q.ids[i];
  }
  return q.ids.back();
}

// First emitted tokens over kDraws blocks whose first draft token is drawn from kQ, and how
// often that token was accepted; with `pass_q` false, verified as if the draft were deterministic.
struct FirstTokens {
  std::vector<int64_t> counts = std::vector<int64_t>(kVocab, 0);
  double acceptance = 0;
};

FirstTokens first_tokens(bool pass_q, uint64_t seed) {
  const std::vector<float> logits = logits_of({kP0, kP1, kP1});
  Sampler sampler({.temperature = 1.0f, .seed = seed});
  std::mt19937_64 drafter(seed + 1);
  FirstTokens result;
  int64_t accepted = 0;
  for (int i = 0; i < kDraws; ++i) {
    const std::vector<int32_t> draft = {draw_from(kQ, drafter), draw_from(kQ, drafter)};
    const std::vector<DraftDistribution> q = {kQ, kQ};
    const Acceptance a = accept_speculative_sampling(
        draft, logits, kVocab, sampler,
        pass_q ? std::span<const DraftDistribution>(q) : std::span<const DraftDistribution>());
    ++result.counts[static_cast<size_t>(a.accepted >= 1 ? draft[0] : a.bonus)];
    accepted += a.accepted >= 1 ? 1 : 0;
  }
  result.acceptance = static_cast<double>(accepted) / kDraws;
  return result;
}

TEST(DraftDistribution, VerifyingWithQEmitsTheTargetsDistribution) {
  const FirstTokens t = first_tokens(/*pass_q=*/true, 31);
  EXPECT_LT(chi_square_goodness_of_fit(t.counts, kP0), chi_square_critical_0_001(kVocab - 1))
      << ::testing::PrintToString(t.counts);
}

// Both rules are exact (the point-mass rule is exact for a draft chosen any way independent of
// the target's draws), but only q's accepts as often as the draft allows: sum min(p, q) = 0.50
// here, against sum q p = 0.1675 when q is ignored. This is why the draft's q travels with it.
TEST(DraftDistribution, VerifyingWithQAcceptsWhatIgnoringItLoses) {
  const FirstTokens with_q = first_tokens(/*pass_q=*/true, 41);
  const FirstTokens without_q = first_tokens(/*pass_q=*/false, 43);
  EXPECT_NEAR(with_q.acceptance, 0.50, 0.02);
  EXPECT_NEAR(without_q.acceptance, 0.1675, 0.02);
  EXPECT_LT(chi_square_goodness_of_fit(without_q.counts, kP0), chi_square_critical_0_001(kVocab - 1))
      << ::testing::PrintToString(without_q.counts);
}

TEST(DraftDistribution, APointMassIsTheDeterministicRule) {
  const std::vector<float> logits = logits_of({kP0, kP1, kP1});
  Sampler with_q({.temperature = 1.0f, .seed = 77}), without_q({.temperature = 1.0f, .seed = 77});
  for (int i = 0; i < 2000; ++i) {
    const std::vector<int32_t> draft = {i % 5, (i / 5) % 5};
    const std::vector<DraftDistribution> q = {{{draft[0]}, {1.0f}}, {{draft[1]}, {1.0f}}};
    const Acceptance a = accept_speculative_sampling(draft, logits, kVocab, with_q, q);
    const Acceptance b = accept_speculative_sampling(draft, logits, kVocab, without_q);
    ASSERT_EQ(a.accepted, b.accepted) << "block " << i;
    ASSERT_EQ(a.bonus, b.bonus) << "block " << i;
  }
}

// ---- end to end: a DFlash2 drafter sampling its drafts through the selector ----

class Dflash2Sampling : public ::testing::TestWithParam<SpecMode> {
 protected:
  static constexpr int64_t kTokens = 5;  // the prefill's token, then a block of 4
  static constexpr int64_t kSequences = 1500;
  // The tiny target's logits span about 5: at 0.5 the target and the selector share enough
  // mass that drafts are both accepted and rejected.
  static constexpr float kTemperature = 0.5f;

  static TinyModelSpec target_spec() {
    TinyModelSpec s;
    s.vocab = 301;
    s.dtype = DType::kF32;
    s.seed = 29;
    return s;
  }
  static TinyDrafterSpec drafter_spec() {
    TinyDrafterSpec d{.layers = 1, .block_size = 4, .seed = 5};
    d.dflash2 = true;
    d.selector_top_k = 16;
    return d;
  }
  Dflash2Sampling() : pair_(target_spec(), drafter_spec()) {}

  std::vector<std::vector<int32_t>> run_many(SpecMode spec, uint64_t first_seed, std::vector<TraceRecord>* trace) {
    std::vector<SequenceRequest> requests;
    for (int64_t i = 0; i < kSequences; ++i) {
      SequenceRequest r;
      r.generation = {.prompt_tokens = some_tokens(6, 250, 9),
                      .max_tokens = kTokens,
                      .sampling = {.temperature = kTemperature, .seed = first_seed + static_cast<uint64_t>(i)},
                      .ignore_eos = true};
      r.spec = spec;
      requests.push_back(std::move(r));
    }
    return run_engine(*pair_.target.model, spec == SpecMode::kOff ? nullptr : pair_.proposer.get(), requests, 64,
                      trace);
  }

  DFlashTestPair pair_;
};

TEST_P(Dflash2Sampling, SampledTokensHaveThePlainDistribution) {
  const std::vector<std::vector<int32_t>> plain = run_many(SpecMode::kOff, 1, nullptr);
  std::vector<TraceRecord> trace;
  const std::vector<std::vector<int32_t>> speculative = run_many(GetParam(), 1'000'001, &trace);
  int64_t drafted = 0, accepted = 0;
  for (const TraceRecord& r : trace) {
    drafted += static_cast<int64_t>(r.draft.size());
    accepted += r.accepted;
  }
  if (GetParam() == SpecMode::kDflash) {
    ASSERT_GT(drafted, 0);
    // A random drafter: few of its drafts survive, but enough that both branches run.
    EXPECT_GT(accepted, 20) << "drafts must be accepted too (" << accepted << " of " << drafted << ")";
    EXPECT_LT(accepted, drafted) << "and rejected";
  }
  for (int64_t position = 1; position < kTokens; ++position) {
    std::vector<int32_t> a, b;
    for (const auto& out : plain) a.push_back(out.at(static_cast<size_t>(position)));
    for (const auto& out : speculative) b.push_back(out.at(static_cast<size_t>(position)));
    const Homogeneity h = chi_square_homogeneity(a, b, /*min_count=*/20, /*max_categories=*/30);
    ASSERT_GE(h.degrees_of_freedom, 3) << "output position " << position;
    EXPECT_LT(h.chi_square, chi_square_critical_0_001(h.degrees_of_freedom))
        << "output position " << position << ": DFlash2 and plain sampling differ (chi-square " << h.chi_square << ", "
        << h.degrees_of_freedom << " degrees of freedom)";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Dflash2Sampling, ::testing::Values(SpecMode::kDflash, SpecMode::kAuto),
                         [](const ::testing::TestParamInfo<SpecMode>& param_info) {
                           return std::string(param_info.param == SpecMode::kDflash ? "Dflash" : "Auto");
                         });

}  // namespace
}  // namespace flashq::testing
