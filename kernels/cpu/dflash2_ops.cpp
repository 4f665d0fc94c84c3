#include "kernels/cpu/dflash2_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace flashq::cpu {

void grouped_dynamic_conv(const float* x, const float* dynamic, WeightVector base, const int32_t* row_in_block,
                          int64_t rows, int64_t channels, int64_t taps, int64_t group_size, float* out) {
  const int64_t groups = channels / group_size;
#pragma omp parallel for if (rows * channels * taps >= (1 << 16))
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t reach = std::min<int64_t>(taps - 1, row_in_block[t]);  // taps before the block read zeros
    for (int64_t c = 0; c < channels; ++c) {
      float sum = 0.0f;
      for (int64_t o = 0; o <= reach; ++o) {
        const float weight = base[o * channels + c] + dynamic[t * taps * groups + o * groups + c / group_size];
        sum = std::fma(weight, x[(t - o) * channels + c], sum);
      }
      out[t * channels + c] = sum;
    }
  }
}

namespace {

// NaN ranks as -inf, as in every sampler here.
float rank_value(float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; }

}  // namespace

void top_k(const float* logits, int64_t rows, int64_t vocab, int64_t k, float* values, int32_t* ids) {
#pragma omp parallel for if (rows * vocab >= (1 << 18))
  for (int64_t m = 0; m < rows; ++m) {
    const float* row = logits + m * vocab;
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    auto before = [row](int32_t a, int32_t b) {
      const float va = rank_value(row[a]), vb = rank_value(row[b]);
      return va > vb || (va == vb && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      ids[m * k + j] = order[static_cast<size_t>(j)];
      values[m * k + j] = rank_value(row[order[static_cast<size_t>(j)]]);
    }
  }
}

void selector_pair_scores(const float* a, const float* h, const float* b, int64_t rows, int64_t k, int64_t rank,
                          float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const float* ap = a + (i * k + p) * rank;
      for (int64_t q = 0; q < k; ++q) {
        const float* bq = b + (i * k + q) * rank;
        float sum = 0.0f;
        for (int64_t r = 0; r < rank; ++r) sum = std::fma(ap[r] * h[i * rank + r], bq[r], sum);
        out[(i * k + p) * k + q] = sum;
      }
    }
  }
}

}  // namespace flashq::cpu
