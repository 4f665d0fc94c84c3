#include "kernels/cpu/causal_conv1d.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/simd.h"

namespace flashq::cpu {
namespace {

// Channels a task takes: its taps' sums stay in a small buffer while rows go by.
constexpr int64_t kChannelBlock = 256;

}  // namespace

void causal_conv1d(const float* x, WeightVector weight, int64_t rows, int64_t channels, int64_t kernel, float* state,
                   float* out) {
  const int64_t history = kernel - 1;
  // The state's rows, then the chunk's: the taps of row t are inputs t .. t + history.
  std::vector<float> inputs(static_cast<size_t>((history + rows) * channels));
  std::copy(state, state + history * channels, inputs.begin());
  std::copy(x, x + rows * channels, inputs.begin() + history * channels);
  // Tap-major, so that a tap's weights for consecutive channels are consecutive.
  std::vector<float> taps(static_cast<size_t>(kernel * channels));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < kernel; ++j) taps[j * channels + c] = weight[c * kernel + j];
  }
  const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (rows * channels * kernel >= (int64_t{1} << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kChannelBlock, n = std::min(kChannelBlock, channels - c0);
    float sum[kChannelBlock];
    for (int64_t t = 0; t < rows; ++t) {
      std::fill(sum, sum + n, 0.0f);
      for (int64_t j = 0; j < kernel; ++j) {  // every channel sums its taps in tap order
        const float* w = taps.data() + j * channels + c0;
        const float* in = inputs.data() + (t + j) * channels + c0;
        for (int64_t i = 0; i < n; ++i) sum[i] = std::fma(w[i], in[i], sum[i]);
      }
      // SiLU, 8 lanes at a time (exp8: within 2 ulp of expf), the block's tail one by one.
      float* o = out + t * channels + c0;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(sum + i);
        const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(o + i, _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
      }
      for (; i < n; ++i) o[i] = sum[i] / (1.0f + std::exp(-sum[i]));
    }
  }
  std::copy(inputs.end() - history * channels, inputs.end(), state);
}

}  // namespace flashq::cpu
