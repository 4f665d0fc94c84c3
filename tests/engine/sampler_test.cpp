// Sampling: greedy, temperature, top-k, top-p, and determinism by seed.
#include <cmath>
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend_factory.h"
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

// A NaN logit (a broken model) reads as -inf in every argmax and sampler, as on the GPU: it never
// wins, even at index 0 where a plain `>` scan would keep it, and weighs nothing.
TEST(Sampler, NanLogitsReadAsMinusInfinity) {
  EXPECT_EQ(argmax(std::vector<float>{NAN, 1.0f, 5.0f, 2.0f}), 2);
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, NAN, -INFINITY}), 0);
  EXPECT_EQ(argmax(std::vector<float>{NAN, NAN}), 0);
  EXPECT_EQ(argmax(std::vector<float>{3.0f, NAN, 3.0f}), 0);
  const std::vector<float> with_nan = {NAN, 0.5f, NAN, -1.0f, 2.0f, NAN};
  std::vector<float> with_minus_infinity = with_nan;
  for (float& l : with_minus_infinity) l = std::isnan(l) ? -INFINITY : l;
  for (const SamplingParams& params :
       {SamplingParams{.temperature = 1.0f}, SamplingParams{.temperature = 0.7f, .top_k = 2},
        SamplingParams{.temperature = 1.3f, .top_p = 0.8f},
        SamplingParams{.temperature = 1.0f, .top_k = 5, .top_p = 0.95f}}) {
    std::vector<float> got, want;
    Sampler(params).distribution(with_nan, got);
    Sampler(params).distribution(with_minus_infinity, want);
    EXPECT_EQ(got, want) << "temperature " << params.temperature << " top_k " << params.top_k;
    for (size_t i : {size_t{0}, size_t{2}, size_t{5}}) EXPECT_EQ(got[i], 0.0f);
  }
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

// The backend's sampling (kernels/cpu/sampling.h: what the GPU draws too) against this Sampler:
// for the same uniform u, the id where the running probability in index order first exceeds u,
// over the distribution Sampler::distribution gives, for every mix of temperature, top-k and
// top-p, with ties (quantised logits). They differ only where u is within float rounding of a
// boundary of that running sum.
TEST(BackendSampling, DrawsFromTheSamplersDistribution) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const int64_t vocab = 257;
  int checked = 0, near_a_boundary = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& l : logits) l = round % 2 ? std::round(normal(rng)) : normal(rng);
    const SamplingParams params{.temperature = round % 7 == 0 ? 0.0f : 0.25f + 0.25f * static_cast<float>(round % 6),
                                .top_k = round % 3 == 0 ? 0 : 1 + (round * 13) % 40,
                                .top_p = round % 4 == 0 ? 1.0f : 0.3f + 0.15f * static_cast<float>(round % 5)};
    std::vector<float> probs;
    Sampler(params).distribution(logits, probs);
    const float u = uniform(rng);
    Tensor logits_t = Tensor::zeros_cpu(DType::kF32, {1, vocab});
    std::copy(logits.begin(), logits.end(), logits_t.data<float>());
    Tensor params_t = Tensor::zeros_cpu(DType::kF32, {1, 4});
    const float row[4] = {params.temperature, static_cast<float>(params.top_k), params.top_p, u};
    std::copy(row, row + 4, params_t.data<float>());
    Tensor id = Tensor::zeros_cpu(DType::kI32, {1});
    backend->sample(logits_t, params_t, id);
    const int32_t got = id.data<int32_t>()[0];
    ASSERT_GE(got, 0);
    ASSERT_LT(got, vocab);
    EXPECT_GT(probs[static_cast<size_t>(got)], 0.0f) << "round " << round << ": drew an id the Sampler excludes";
    double running = 0.0, total = 0.0;
    for (float p : probs) total += p;
    int32_t expected = -1;
    double nearest = 1.0;
    for (int64_t i = 0; i < vocab; ++i) {
      if (probs[i] <= 0.0f) continue;
      running += probs[i];
      nearest = std::min(nearest, std::abs(running / total - u));
      if (expected < 0 && u * total < running) expected = static_cast<int32_t>(i);
    }
    if (nearest < 1e-5) {
      ++near_a_boundary;
      continue;
    }
    EXPECT_EQ(got, expected) << "round " << round << ": u " << u;
    ++checked;
  }
  EXPECT_GT(checked, 290) << near_a_boundary << " draws fell on a boundary";
}

// The backend's argmax and sampling read NaN as -inf too: the same ids as with -inf in its place.
TEST(BackendSampling, NanLogitsReadAsMinusInfinity) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const int64_t vocab = 6;
  const std::vector<float> with_nan = {NAN, 0.5f, NAN, -1.0f, 2.0f, NAN};
  std::vector<float> with_minus_infinity = with_nan;
  for (float& l : with_minus_infinity) l = std::isnan(l) ? -INFINITY : l;
  auto row_of = [&](const std::vector<float>& values) {
    Tensor t = Tensor::zeros_cpu(DType::kF32, {1, vocab});
    std::copy(values.begin(), values.end(), t.data<float>());
    return t;
  };
  Tensor id = Tensor::zeros_cpu(DType::kI32, {1});
  backend->argmax(row_of(with_nan), id);
  EXPECT_EQ(id.data<int32_t>()[0], 4);
  auto draw = [&](const std::vector<float>& logits, std::array<float, 4> params) {
    Tensor params_t = Tensor::zeros_cpu(DType::kF32, {1, 4});
    std::copy(params.begin(), params.end(), params_t.data<float>());
    backend->sample(row_of(logits), params_t, id);
    return id.data<int32_t>()[0];
  };
  for (float u = 0.01f; u < 1.0f; u += 0.07f) {
    for (std::array<float, 4> params : {std::array<float, 4>{0.0f, 0.0f, 1.0f, u},
                                        {1.0f, 0.0f, 1.0f, u},
                                        {0.8f, 2.0f, 1.0f, u},
                                        {1.2f, 0.0f, 0.7f, u}}) {
      const int32_t got = draw(with_nan, params);
      EXPECT_EQ(got, draw(with_minus_infinity, params)) << "u " << u << " temperature " << params[0];
      EXPECT_FALSE(std::isnan(with_nan[static_cast<size_t>(got)])) << "drew a NaN logit's id at u " << u;
    }
  }
}

}  // namespace
}  // namespace flashq
