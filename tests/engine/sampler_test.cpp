// Sampling: greedy, temperature, top-k, top-p, and determinism by seed.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "shared/error.h"
#include "worker/engine/sampler.h"

namespace flashq {
namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::map<int32_t, int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) counts[sampler.sample(logits)]++;
  return counts;
}

TEST(Sampler, GreedyPicksTheLowestIndexAmongEqualMaxima) {
  Sampler sampler({});
  EXPECT_EQ(sampler.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}), 1);
}

TEST(Sampler, SameSeedGivesTheSameTokens) {
  std::vector<float> logits = logits_of({0.1, 0.2, 0.3, 0.4});
  SamplingParams params{.temperature = 1.0f, .seed = 42};
  Sampler a(params), b(params), c({.temperature = 1.0f, .seed = 43});
  std::vector<int32_t> from_a, from_b, from_c;
  for (int i = 0; i < 64; ++i) {
    from_a.push_back(a.sample(logits));
    from_b.push_back(b.sample(logits));
    from_c.push_back(c.sample(logits));
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_NE(from_a, from_c);
}

TEST(Sampler, TemperatureOneDrawsFromTheSoftmax) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  Sampler sampler({.temperature = 1.0f, .seed = 7});
  const int draws = 40000;
  auto counts = histogram(sampler, logits_of(probs), draws);
  double chi_square = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double expected = probs[i] * draws;
    chi_square += std::pow(counts[static_cast<int32_t>(i)] - expected, 2) / expected;
  }
  EXPECT_LT(chi_square, 16.27);  // p = 0.001 for 3 degrees of freedom
}

TEST(Sampler, TopKKeepsOnlyTheKLargest) {
  Sampler sampler({.temperature = 2.0f, .top_k = 2, .seed = 1});
  auto counts = histogram(sampler, logits_of({0.3, 0.1, 0.35, 0.25}), 2000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[2], 0);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingTheMass) {
  Sampler sampler({.temperature = 1.0f, .top_p = 0.75f, .seed = 1});
  std::vector<float> probs;
  sampler.distribution(logits_of({0.05, 0.5, 0.15, 0.3}), probs);
  EXPECT_NEAR(probs[1], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(probs[3], 0.3 / 0.8, 1e-6);
  EXPECT_EQ(probs[0], 0.0f);
  EXPECT_EQ(probs[2], 0.0f);
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), Error);
  EXPECT_THROW(Sampler({.temperature = 1.0f, .top_k = -2}), Error);
  EXPECT_THROW(Sampler({.temperature = 1.0f, .top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.temperature = 1.0f, .top_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.temperature = NAN}), Error);
}

}  // namespace
}  // namespace flashq
