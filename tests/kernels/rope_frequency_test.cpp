// The inverse frequencies RoPE turns by (kernels/rope_frequency.h), the one definition both
// backends use, against values worked out by hand from transformers' definitions: unscaled
// theta^(-2i/d); linear divides by the factor; llama3 keeps the high frequencies, divides the low
// ones by the factor and blends continuously between; yarn keeps the pairs turning more than
// beta_fast times over the original context, divides those turning less than beta_slow times,
// ramps linearly between, and scales cos and sin by its attention factor, also against the NumPy
// reference (tests/reference/rope_reference.py). And what the ops refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "shared/error.h"
#include "tests/support/run_command.h"

namespace flashq {
namespace {

RopeOptions llama3(float factor) {
  return {.theta = 500000.0f,
          .scaling = RopeScaling::kLlama3,
          .factor = factor,
          .low_freq_factor = 1.0f,
          .high_freq_factor = 4.0f,
          .original_max_position = 8192.0f};
}

double wavelength(double inv_freq) { return 2.0 * std::numbers::pi / inv_freq; }

TEST(RopeFrequency, UnscaledIsThetaToTheMinusTwoIOverD) {
  const RopeOptions rope{.theta = 10000.0f};
  EXPECT_DOUBLE_EQ(rope_inverse_frequency(rope, 0, 64), 1.0);
  EXPECT_NEAR(rope_inverse_frequency(rope, 16, 64), 0.01, 1e-15);  // 10000^(-1/2)
  EXPECT_NEAR(rope_inverse_frequency(rope, 31, 64), std::pow(10000.0, -62.0 / 64.0), 1e-18);
}

TEST(RopeFrequency, LinearDividesEveryFrequencyByTheFactor) {
  const RopeOptions plain{.theta = 10000.0f};
  const RopeOptions linear{.theta = 10000.0f, .scaling = RopeScaling::kLinear, .factor = 4.0f};
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_DOUBLE_EQ(rope_inverse_frequency(linear, i, 64), rope_inverse_frequency(plain, i, 64) / 4.0) << i;
  }
}

// Llama 3.1 (theta 500000, head_dim 128, original 8192): wavelengths below 2048 keep their
// frequency, those above 8192 are divided by 8, and between the blend is continuous at both ends.
TEST(RopeFrequency, Llama3KeepsHighDividesLowAndBlendsBetween) {
  const RopeOptions plain{.theta = 500000.0f};
  const RopeOptions scaled = llama3(8.0f);
  int kept = 0, divided = 0, blended = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const double f = rope_inverse_frequency(plain, i, 128), g = rope_inverse_frequency(scaled, i, 128);
    const double w = wavelength(f);
    if (w < 2048.0) {
      EXPECT_DOUBLE_EQ(g, f) << i;
      ++kept;
    } else if (w > 8192.0) {
      EXPECT_DOUBLE_EQ(g, f / 8.0) << i;
      ++divided;
    } else {
      const double smooth = (8192.0 / w - 1.0) / 3.0;
      EXPECT_NEAR(g, (1.0 - smooth) * f / 8.0 + smooth * f, 1e-15) << i;
      EXPECT_GT(g, f / 8.0) << i;
      EXPECT_LT(g, f) << i;
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(RopeFrequency, OpsRefuseAScalingTheyCannotApply) {
  RopeOptions rope = llama3(8.0f);
  EXPECT_NO_THROW(require_rope(rope, "test"));
  rope.factor = 0.5f;
  EXPECT_THROW(require_rope(rope, "test"), Error);
  rope = llama3(8.0f);
  rope.high_freq_factor = 1.0f;  // not above low_freq_factor
  EXPECT_THROW(require_rope(rope, "test"), Error);
  rope = llama3(8.0f);
  rope.theta = 0.0f;
  EXPECT_THROW(require_rope(rope, "test"), Error);
}

RopeOptions gpt_oss_yarn() {
  return {.theta = 150000.0f,
          .scaling = RopeScaling::kYarn,
          .factor = 32.0f,
          .original_max_position = 4096.0f,
          .beta_fast = 32.0f,
          .beta_slow = 1.0f,
          .truncate = false};
}

// gpt-oss (theta 150000, head_dim 64, original 4096): the pair turning 32 times over 4096
// positions is 64 ln(4096 / 64 pi) / (2 ln 150000) = 8.09, the one turning once 17.40; pairs up to
// 8 keep their frequency, pairs from 18 are divided by 32, and between the blend moves linearly
// with the pair index (not rounded: truncate false).
TEST(RopeFrequency, YarnKeepsFastPairsDividesSlowOnesAndRampsBetween) {
  const RopeOptions plain{.theta = 150000.0f};
  const RopeOptions yarn = gpt_oss_yarn();
  const double low = 64.0 * std::log(4096.0 / (32.0 * 2.0 * std::numbers::pi)) / (2.0 * std::log(150000.0));
  const double high = 64.0 * std::log(4096.0 / (2.0 * std::numbers::pi)) / (2.0 * std::log(150000.0));
  EXPECT_NEAR(low, 8.093, 1e-3);
  EXPECT_NEAR(high, 17.398, 1e-3);
  for (int64_t i = 0; i < 32; ++i) {
    const double f = rope_inverse_frequency(plain, i, 64), g = rope_inverse_frequency(yarn, i, 64);
    if (i <= 8) {
      EXPECT_DOUBLE_EQ(g, f) << i;
    } else if (i >= 18) {
      EXPECT_NEAR(g, f / 32.0, 1e-15 * f) << i;
    } else {
      const double ramp = (static_cast<double>(i) - low) / (high - low);
      EXPECT_NEAR(g, f / 32.0 * ramp + f * (1.0 - ramp), 1e-14 * f) << i;
    }
  }
  EXPECT_FLOAT_EQ(rope_attention_factor(yarn), static_cast<float>(0.1 * std::log(32.0) + 1.0));
  EXPECT_EQ(rope_attention_factor(plain), 1.0f);
  EXPECT_EQ(rope_attention_factor(llama3(8.0f)), 1.0f);
}

// Truncated (the default), the ramp's ends are whole pair indices: floor(8.09) = 8 and
// ceil(17.40) = 18, so pair 8 is the last kept whatever the fraction.
TEST(RopeFrequency, TruncatedYarnRampsBetweenWholePairIndices) {
  RopeOptions yarn = gpt_oss_yarn();
  yarn.truncate = true;
  const RopeOptions plain{.theta = 150000.0f};
  for (int64_t i = 0; i < 32; ++i) {
    const double f = rope_inverse_frequency(plain, i, 64);
    const double ramp = std::clamp((static_cast<double>(i) - 8.0) / 10.0, 0.0, 1.0);
    EXPECT_NEAR(rope_inverse_frequency(yarn, i, 64), f / 32.0 * ramp + f * (1.0 - ramp), 1e-14 * f) << i;
  }
}

// The frequencies and the cos/sin factor of the NumPy reference, for settings as config.json
// states them (rope_reference.py reads them as the published code does).
struct NumpyYarn {
  const char* config;
  int64_t head_dim;
  RopeOptions rope;
};

TEST(RopeFrequency, YarnMatchesTheNumpyReference) {
  RopeOptions qwen3{
      .theta = 1000000.0f, .scaling = RopeScaling::kYarn, .factor = 4.0f, .original_max_position = 32768.0f};
  RopeOptions given = gpt_oss_yarn();
  given.attention_factor = 1.25f;
  given.beta_fast = 16.0f;
  given.beta_slow = 2.0f;
  const NumpyYarn cases[] = {
      {R"({"rope_theta": 150000, "max_position_embeddings": 131072, "rope_scaling": {"beta_fast": 32.0,
          "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn",
          "truncate": false}})",
       64, gpt_oss_yarn()},
      {R"({"rope_theta": 1000000, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "yarn",
          "factor": 4.0, "original_max_position_embeddings": 32768}})",
       128, qwen3},
      {R"({"rope_theta": 150000, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn",
          "factor": 32.0, "beta_fast": 16, "beta_slow": 2, "truncate": false, "attention_factor": 1.25}})",
       64, given},
  };
  for (const NumpyYarn& c : cases) {
    std::string quoted = c.config;
    for (char& ch : quoted) {
      if (ch == '\n') ch = ' ';
    }
    const testing::CommandResult run =
        testing::run_command("/usr/bin/python3 tests/reference/rope_reference.py --head-dim " +
                             std::to_string(c.head_dim) + " --config '" + quoted + "'");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const nlohmann::json want = nlohmann::json::parse(run.output);
    const auto frequencies = want.at("inverse_frequencies").get<std::vector<double>>();
    ASSERT_EQ(frequencies.size(), static_cast<size_t>(c.head_dim / 2));
    for (int64_t i = 0; i < c.head_dim / 2; ++i) {
      EXPECT_NEAR(rope_inverse_frequency(c.rope, i, c.head_dim), frequencies[i], 1e-12 * frequencies[i])
          << c.config << " pair " << i;
    }
    EXPECT_FLOAT_EQ(rope_attention_factor(c.rope), static_cast<float>(want.at("attention_factor").get<double>()))
        << c.config;
  }
}

TEST(RopeFrequency, OpsRefuseAYarnScalingTheyCannotApply) {
  EXPECT_NO_THROW(require_rope(gpt_oss_yarn(), "test"));
  RopeOptions rope = gpt_oss_yarn();
  rope.beta_fast = 0.5f;  // below beta_slow
  EXPECT_THROW(require_rope(rope, "test"), Error);
  rope = gpt_oss_yarn();
  rope.beta_slow = 0.0f;
  EXPECT_THROW(require_rope(rope, "test"), Error);
  rope = gpt_oss_yarn();
  rope.original_max_position = 0.0f;
  EXPECT_THROW(require_rope(rope, "test"), Error);
  rope = gpt_oss_yarn();
  rope.attention_factor = -1.0f;
  EXPECT_THROW(require_rope(rope, "test"), Error);
  rope = gpt_oss_yarn();
  rope.factor = 0.5f;
  EXPECT_THROW(require_rope(rope, "test"), Error);
}

TEST(CpuBackend, AddBiasAddsToEveryRowAndRefusesAMismatchedBias) {
  auto backend = make_cpu_backend();
  Tensor y = backend->allocate(DType::kF32, {3, 4});
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  backend->copy_from_host(values.data(), y);
  Tensor bias = backend->allocate(DType::kF32, {4});
  const std::vector<float> b = {0.5f, -1.0f, 0.0f, 2.0f};
  backend->copy_from_host(b.data(), bias);
  backend->add_bias(y, bias);
  std::vector<float> got(12);
  backend->copy_to_host(y, got.data());
  EXPECT_EQ(got, (std::vector<float>{1.5f, 1, 3, 6, 5.5f, 5, 7, 10, 9.5f, 9, 11, 14}));
  Tensor wrong = backend->allocate(DType::kF32, {3});
  EXPECT_THROW(backend->add_bias(y, wrong), Error);
}

}  // namespace
}  // namespace flashq
