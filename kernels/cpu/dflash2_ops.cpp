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

// Logits the top-k scan passes over together when none can enter.
constexpr int64_t kTopKRun = 16;

// NaN ranks as -inf, as in every sampler here.
float rank_value(float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; }

}  // namespace

void top_k(const float* logits, int64_t rows, int64_t vocab, int64_t k, float* values, int32_t* ids) {
  using Entry = std::pair<float, int32_t>;
  // a before b: the larger value, then the lower id. As a heap's order, the top is the worst kept.
  auto before = [](const Entry& a, const Entry& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
#pragma omp parallel for if (rows * vocab >= (1 << 18))
  for (int64_t m = 0; m < rows; ++m) {
    const float* row = logits + m * vocab;
    // One scan keeping the k best. Ids only grow, so once k are kept an entry enters only with a
    // value above the worst kept: a run of 16 with none above it is passed over in one test.
    std::vector<Entry> kept;
    kept.reserve(static_cast<size_t>(k));
    for (int64_t first = 0; first < vocab; first += kTopKRun) {
      const int64_t last = std::min(vocab, first + kTopKRun);
      if (static_cast<int64_t>(kept.size()) == k && last - first == kTopKRun) {
        const float worst = kept.front().first;
        bool any_above = false;
        for (int64_t i = first; i < last; ++i) any_above |= row[i] > worst;  // NaN is never above
        if (!any_above) continue;
      }
      for (int64_t i = first; i < last; ++i) {
        const Entry entry{rank_value(row[i]), static_cast<int32_t>(i)};
        if (static_cast<int64_t>(kept.size()) < k) {
          kept.push_back(entry);
          std::push_heap(kept.begin(), kept.end(), before);
        } else if (before(entry, kept.front())) {
          std::pop_heap(kept.begin(), kept.end(), before);
          kept.back() = entry;
          std::push_heap(kept.begin(), kept.end(), before);
        }
      }
    }
    std::sort_heap(kept.begin(), kept.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      values[m * k + j] = kept[static_cast<size_t>(j)].first;
      ids[m * k + j] = kept[static_cast<size_t>(j)].second;
    }
  }
}

void selector_pair_scores(const float* a, const float* h, const float* b, int64_t rows, int64_t k, int64_t rank,
                          float* out) {
  std::vector<float> scaled(static_cast<size_t>(rank)), transposed(static_cast<size_t>(rank * k));
  std::vector<float> sums(static_cast<size_t>(k));
  for (int64_t i = 0; i < rows; ++i) {
    // b's rows of this row's candidates as [rank, k], so every candidate's sum advances together,
    // each still over r in order.
    for (int64_t q = 0; q < k; ++q) {
      for (int64_t r = 0; r < rank; ++r) transposed[r * k + q] = b[(i * k + q) * rank + r];
    }
    for (int64_t p = 0; p < k; ++p) {
      const float* ap = a + (i * k + p) * rank;
      for (int64_t r = 0; r < rank; ++r) scaled[r] = ap[r] * h[i * rank + r];
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t r = 0; r < rank; ++r) {
        const float* bt = transposed.data() + r * k;
        for (int64_t q = 0; q < k; ++q) sums[q] = std::fma(scaled[r], bt[q], sums[q]);
      }
      std::copy(sums.begin(), sums.end(), out + (i * k + p) * k);
    }
  }
}

}  // namespace flashq::cpu
