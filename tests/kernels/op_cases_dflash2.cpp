// The table's cases for DFlash2's drafter ops (docs/dflash.md §7), each held to its definition
// computed here in double: grouped_dynamic_conv (z-lab's _grouped_dynamic_convolve: per tap o, the
// static base[o, c] plus the dynamic weight of c's group, times the input o rows back, zero before
// the block's first row), with the published two taps and groups of 16 over bf16 bases, and three
// taps over f32, blocks of 1 to 16 rows; top_k (the k largest, descending, ties to the lower
// index, NaN as -inf: ids and values exact), with ties and NaNs planted; selector_pair_scores (the
// low-rank codebook term <a_p * h, b_k>), at the published K = 16 and a rank of 256.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"

namespace flashq {
namespace {

struct ConvCase {
  std::vector<int64_t> blocks;  // rows per block
  int64_t channels, taps, group_size;
  DType base_dtype;
};

OpCase conv_case(const ConvCase& c) {
  struct Data {
    std::vector<float> x, dynamic, base;
    std::vector<int32_t> row_in_block;
  };
  const int64_t rows = std::accumulate(c.blocks.begin(), c.blocks.end(), int64_t{0});
  const int64_t groups = c.channels / c.group_size;
  const LazyInputs<Data> d([c, rows, groups] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows * 7 + c.channels + c.taps));
    made.x = random_floats(static_cast<size_t>(rows * c.channels), rng, 2.0f);
    made.dynamic = random_floats(static_cast<size_t>(rows * c.taps * groups), rng, 0.5f);
    made.base = random_floats(static_cast<size_t>(c.taps * c.channels), rng);
    round_to(c.base_dtype, made.base);
    for (int64_t n : c.blocks) {
      for (int64_t j = 0; j < n; ++j) made.row_in_block.push_back(static_cast<int32_t>(j));
    }
    return made;
  });
  std::string blocks;
  for (int64_t n : c.blocks) blocks += (blocks.empty() ? "" : ",") + std::to_string(n);
  return {
      "grouped_dynamic_conv",
      "blocks " + blocks + " of " + std::to_string(c.channels) + ", " + std::to_string(c.taps) + " taps, groups of " +
          std::to_string(c.group_size) + ", " + std::string(dtype_name(c.base_dtype)) + " base",
      [=](OpDevice& dev) {
        Tensor x = dev.upload(d->x, {rows, c.channels}), dynamic = dev.upload(d->dynamic, {rows, c.taps * groups});
        Tensor base = dev.weight(d->base, c.base_dtype, {c.taps, c.channels});
        Tensor row_in_block = dev.ints(d->row_in_block), out = dev.poisoned({rows, c.channels});
        return PreparedRun{[&dev, x, dynamic, base, row_in_block, out, c]() mutable {
                             dev.backend().grouped_dynamic_conv(x, dynamic, base, row_in_block, c.group_size, out);
                           },
                           [&dev, out] { return Outputs{dev.read(out)}; }};
      },
      [=] {
        std::vector<float> out(static_cast<size_t>(rows * c.channels));
        for (int64_t t = 0; t < rows; ++t) {
          for (int64_t ch = 0; ch < c.channels; ++ch) {
            double sum = 0.0;
            for (int64_t o = 0; o < c.taps; ++o) {
              if (o > d->row_in_block[t]) break;  // before the block: zero
              const double w = d->base[o * c.channels + ch] + d->dynamic[(t * c.taps + o) * groups + ch / c.group_size];
              sum += w * d->x[(t - o) * c.channels + ch];
            }
            out[t * c.channels + ch] = static_cast<float>(sum);
          }
        }
        return std::vector<Expected>{{"out", out, 1e-6}};
      }};
}

OpCase top_k_case(int64_t rows, int64_t vocab, int64_t k) {
  struct Data {
    std::vector<float> logits;
  };
  const LazyInputs<Data> d([rows, vocab] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows * 3 + vocab));
    made.logits = random_floats(static_cast<size_t>(rows * vocab), rng, 4.0f);
    // Ties at the top and across the k-th place, a NaN, and a row of one value.
    for (int64_t m = 0; m < rows; ++m) {
      float* row = made.logits.data() + m * vocab;
      row[vocab - 1] = row[3] = row[vocab / 2] = 9.0f;
      row[7] = std::numeric_limits<float>::quiet_NaN();
      for (int64_t j = 0; j < 12; ++j) row[(j * 97 + m) % vocab] = 5.0f;
      if (m == rows - 1) std::fill(row, row + vocab, 1.0f);
    }
    return made;
  });
  return {"top_k", std::to_string(rows) + " rows of " + std::to_string(vocab) + ", k " + std::to_string(k),
          [=](OpDevice& dev) {
            Tensor logits = dev.upload(d->logits, {rows, vocab});
            Tensor values = dev.poisoned({rows, k}), ids = dev.poisoned_ints(rows * k).reshape({rows, k});
            return PreparedRun{[&dev, logits, values, ids]() mutable { dev.backend().top_k(logits, values, ids); },
                               [&dev, values, ids] {
                                 return Outputs{dev.read(values), dev.read(ids)};
                               }};
          },
          [=] {
            std::vector<float> values, ids;
            for (int64_t m = 0; m < rows; ++m) {
              const float* row = d->logits.data() + m * vocab;
              auto value = [row](int64_t i) {
                return std::isnan(row[i]) ? -std::numeric_limits<double>::infinity() : static_cast<double>(row[i]);
              };
              std::vector<int64_t> order(static_cast<size_t>(vocab));
              std::iota(order.begin(), order.end(), int64_t{0});
              std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return value(a) > value(b); });
              for (int64_t j = 0; j < k; ++j) {
                values.push_back(static_cast<float>(value(order[j])));
                ids.push_back(static_cast<float>(order[j]));
              }
            }
            return std::vector<Expected>{{"values", values, 0.0}, {"ids", ids, 0.0}};
          }};
}

OpCase pair_scores_case(int64_t rows, int64_t k, int64_t rank) {
  struct Data {
    std::vector<float> a, h, b;
  };
  const LazyInputs<Data> d([rows, k, rank] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows + k * 5 + rank));
    made.a = random_floats(static_cast<size_t>(rows * k * rank), rng);
    made.h = random_floats(static_cast<size_t>(rows * rank), rng);
    made.b = random_floats(static_cast<size_t>(rows * k * rank), rng);
    return made;
  });
  return {"selector_pair_scores",
          std::to_string(rows) + " rows, k " + std::to_string(k) + ", rank " + std::to_string(rank),
          [=](OpDevice& dev) {
            Tensor a = dev.upload(d->a, {rows * k, rank}), h = dev.upload(d->h, {rows, rank});
            Tensor b = dev.upload(d->b, {rows * k, rank}), out = dev.poisoned({rows, k, k});
            return PreparedRun{[&dev, a, h, b, out]() mutable { dev.backend().selector_pair_scores(a, h, b, out); },
                               [&dev, out] { return Outputs{dev.read(out)}; }};
          },
          [=] {
            std::vector<float> out;
            for (int64_t i = 0; i < rows; ++i) {
              for (int64_t p = 0; p < k; ++p) {
                for (int64_t q = 0; q < k; ++q) {
                  double sum = 0.0;
                  for (int64_t r = 0; r < rank; ++r) {
                    sum += static_cast<double>(d->a[(i * k + p) * rank + r]) * d->h[i * rank + r] *
                           d->b[(i * k + q) * rank + r];
                  }
                  out.push_back(static_cast<float>(sum));
                }
              }
            }
            return std::vector<Expected>{{"out", out, 1e-5}};
          }};
}

}  // namespace

std::vector<OpCase> dflash2_op_cases() {
  std::vector<OpCase> cases;
  for (const ConvCase& c : {ConvCase{{8, 8, 4}, 64, 2, 16, DType::kBF16}, ConvCase{{1, 5, 16}, 48, 3, 8, DType::kF32},
                            ConvCase{{15, 15}, 256, 2, 16, DType::kBF16}}) {
    cases.push_back(conv_case(c));
  }
  cases.push_back(top_k_case(5, 1000, 16));
  cases.push_back(top_k_case(3, 5000, 1));
  cases.push_back(top_k_case(2, 20, 20));
  cases.push_back(pair_scores_case(7, 16, 32));
  cases.push_back(pair_scores_case(15, 16, 256));
  cases.push_back(pair_scores_case(1, 4, 8));
  return cases;
}

}  // namespace flashq
