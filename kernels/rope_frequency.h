// RoPE's parameters and the inverse frequency of each rotated pair, one definition compiled for
// the host and for the GPU, so every path that rotates (rope, head_norm_rope, the attention
// input kernels) on every backend forms the same angles. The scaling kinds follow Hugging Face's
// rope_type (docs/models.md): `linear` divides every frequency by `factor` (positions / factor);
// `llama3` divides the low frequencies by `factor`, keeps the high ones, and interpolates
// smoothly between, over wavelengths set by the original context.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FLASHQ_HOST_DEVICE __host__ __device__
#else
#define FLASHQ_HOST_DEVICE
#endif

namespace flashq {

enum class RopeScaling { kNone, kLinear, kLlama3 };

// Rotate-half RoPE's parameters. Trivially copyable: CUDA kernels take it by value.
struct RopeOptions {
  float theta = 0.0f;  // base of the inverse frequencies; positive
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;                    // linear, llama3: how much longer the context became; >= 1
  float low_freq_factor = 1.0f;           // llama3: wavelengths above original / low are divided by factor
  float high_freq_factor = 4.0f;          // llama3: wavelengths below original / high are kept
  float original_max_position = 8192.0f;  // llama3: the context the model was first trained for
};

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
  }
  return inv_freq;
}

}  // namespace flashq
