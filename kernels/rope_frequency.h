// RoPE's parameters and the inverse frequency of each rotated pair, one definition compiled for
// the host and for the GPU, so every path that rotates (rope, head_norm_rope, the attention
// input kernels) on every backend forms the same angles. The scaling kinds follow Hugging Face's
// rope_type (docs/models.md): `linear` divides every frequency by `factor` (positions / factor);
// `llama3` divides the low frequencies by `factor`, keeps the high ones, and interpolates
// smoothly between, over wavelengths set by the original context; `yarn` (gpt-oss) blends each
// frequency between kept and divided by `factor` along a linear ramp over the pair index, between
// the pairs that turn beta_fast and beta_slow times over the original context, and multiplies cos
// and sin by an attention factor (rope_attention_factor).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FLASHQ_HOST_DEVICE __host__ __device__
#else
#define FLASHQ_HOST_DEVICE
#endif

namespace flashq {

enum class RopeScaling { kNone, kLinear, kLlama3, kYarn };

// Rotate-half RoPE's parameters. Trivially copyable: CUDA kernels take it by value.
struct RopeOptions {
  float theta = 0.0f;  // base of the inverse frequencies; positive
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;                    // linear, llama3, yarn: how much longer the context became; >= 1
  float low_freq_factor = 1.0f;           // llama3: wavelengths above original / low are divided by factor
  float high_freq_factor = 4.0f;          // llama3: wavelengths below original / high are kept
  float original_max_position = 8192.0f;  // llama3, yarn: the context the model was first trained for
  float beta_fast = 32.0f;                // yarn: pairs turning more often than this over the original are kept
  float beta_slow = 1.0f;                 // yarn: pairs turning less often than this are divided by factor
  bool truncate = true;                   // yarn: the ramp's ends rounded out to whole pair indices
  float attention_factor = 0.0f;          // yarn: multiplies cos and sin; 0: 0.1 ln(factor) + 1
  // Partial rotary (Qwen3.5, Qwen3-Next: partial_rotary_factor): only each head's first
  // rotary_dims dims rotate, as a head of that width would (rotate-half within them, its
  // frequencies), the rest pass through. 0, or at least the head's dim: the whole head. Even.
  int32_t rotary_dims = 0;
};

// The dims of a head of `head_dim` that rotate.
FLASHQ_HOST_DEVICE inline int64_t rope_rotary_dims(const RopeOptions& rope, int64_t head_dim) {
  return rope.rotary_dims > 0 && rope.rotary_dims < head_dim ? rope.rotary_dims : head_dim;
}

// yarn: the (fractional) pair index that turns `rotations` times over the original context.
FLASHQ_HOST_DEVICE inline double yarn_correction_pair(const RopeOptions& rope, double rotations, int64_t head_dim) {
  return static_cast<double>(head_dim) *
         log(static_cast<double>(rope.original_max_position) / (rotations * 2.0 * 3.14159265358979323846)) /
         (2.0 * log(static_cast<double>(rope.theta)));
}

// inv_freq of pair i (0 <= i < head_dim / 2), in double; the kernels round it to float once, as
// a float32 reference holds its inverse frequencies.
FLASHQ_HOST_DEVICE inline double rope_inverse_frequency(const RopeOptions& rope, int64_t i, int64_t head_dim) {
  const double inv_freq =
      pow(static_cast<double>(rope.theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  const double factor = rope.factor;
  switch (rope.scaling) {
    case RopeScaling::kNone:
      return inv_freq;
    case RopeScaling::kLinear:
      return inv_freq / factor;
    case RopeScaling::kLlama3: {
      const double original = rope.original_max_position;
      const double low = rope.low_freq_factor, high = rope.high_freq_factor;
      const double wavelength = 2.0 * 3.14159265358979323846 / inv_freq;
      if (wavelength > original / low) return inv_freq / factor;  // low frequency: scaled
      if (wavelength < original / high) return inv_freq;          // high frequency: kept
      const double smooth = (original / wavelength - low) / (high - low);
      return (1.0 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
    case RopeScaling::kYarn: {
      // Pairs below `low` keep their frequency (extrapolated), pairs above `high` are divided by
      // factor (interpolated), and the ramp between is linear in the pair index.
      double low = yarn_correction_pair(rope, rope.beta_fast, head_dim);
      double high = yarn_correction_pair(rope, rope.beta_slow, head_dim);
      if (rope.truncate) {
        low = floor(low);
        high = ceil(high);
      }
      low = low > 0.0 ? low : 0.0;
      high = high < static_cast<double>(head_dim - 1) ? high : static_cast<double>(head_dim - 1);
      if (low == high) high += 0.001;  // no division by zero
      double ramp = (static_cast<double>(i) - low) / (high - low);
      ramp = ramp < 0.0 ? 0.0 : (ramp > 1.0 ? 1.0 : ramp);
      return inv_freq / factor * ramp + inv_freq * (1.0 - ramp);
    }
  }
  return inv_freq;
}

// What cos and sin are multiplied by: yarn's attention factor (the given one, else
// 0.1 ln(factor) + 1, and 1 for a factor up to 1), 1 for every other kind.
FLASHQ_HOST_DEVICE inline float rope_attention_factor(const RopeOptions& rope) {
  if (rope.scaling != RopeScaling::kYarn) return 1.0f;
  if (rope.attention_factor > 0.0f) return rope.attention_factor;
  if (rope.factor <= 1.0f) return 1.0f;
  return static_cast<float>(0.1 * log(static_cast<double>(rope.factor)) + 1.0);
}

}  // namespace flashq
