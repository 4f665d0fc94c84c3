// The inverse frequencies RoPE turns by (kernels/rope_frequency.h), the one definition both
// backends use, against values worked out by hand from transformers' definitions: unscaled
// theta^(-2i/d); linear divides by the factor; llama3 keeps the high frequencies, divides the low
// ones by the factor and blends continuously between. And what the ops refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "kernels/backend.h"
#include "shared/error.h"

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
