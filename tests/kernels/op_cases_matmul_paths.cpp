// Tolerances are error bounds, not fitted numbers. An output y = sum_i x_i w_i computed from
// activations x_i (1 + d_i) with |d_i| <= a (activation_rounding) and exact bf16 weights, the
// products summed in float32 in any order (at most 2k terms: two bf16 terms per activation),
// differs from the exact sum by at most
//     (a + 2k u) * sum_i |x_i| |w_i|,   u = 2^-24,
// and the harness compares max |got - want| / max |want|, so each case's tolerance is that bound
// at its worst output over the largest reference value (computed from the case's own inputs).
// For random x and w the typical error is far below the bound (errors of random sign add as a
// square root), so the bound never fails a correct kernel; a wrong pairing, tail or tile gives
// errors of the order of the outputs themselves.
#include "tests/kernels/op_cases_matmul_paths.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

struct Inputs {
  std::vector<float> x, w;
};

Inputs make_inputs(int64_t m, int64_t n, int64_t k) {
  Inputs made;
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 7 + k + 5));
  made.x = random_floats(static_cast<size_t>(m * k), rng);
  made.w = random_floats(static_cast<size_t>(n * k), rng, 0.5f);
  round_to(DType::kBF16, made.w);
  return made;
}

// The bound above, relative to the largest reference value.
double error_bound(cpu::MatmulPath path, const Inputs& in, const std::vector<float>& y, int64_t m, int64_t n,
                   int64_t k) {
  const double per_term = activation_rounding(path) + 2.0 * static_cast<double>(k) * std::ldexp(1.0, -24);
  double worst_abs_sum = 0.0, largest = 1e-30;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double abs_sum = 0.0;
      for (int64_t p = 0; p < k; ++p) abs_sum += std::abs(static_cast<double>(in.x[i * k + p]) * in.w[j * k + p]);
      worst_abs_sum = std::max(worst_abs_sum, abs_sum);
    }
  }
  for (float v : y) largest = std::max(largest, static_cast<double>(std::abs(v)));
  return per_term * worst_abs_sum / largest;
}

std::string shape_name(int64_t m, int64_t n, int64_t k) {
  return "bf16 m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

OpCase product_case(cpu::MatmulPath path, int64_t m, int64_t n, int64_t k) {
  const LazyInputs<Inputs> d([=] { return make_inputs(m, n, k); });
  return {"matmul", shape_name(m, n, k),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {m, k}), w = dev.weight(d->w, DType::kBF16, {n, k}), y = dev.poisoned({m, n});
            return PreparedRun{[&dev, x, w, y]() mutable { dev.backend().matmul(x, w, y); },
                               [&dev, y] { return Outputs{dev.read(y)}; }};
          },
          [=] {
            std::vector<float> y = reference::matmul(d->x, d->w, m, n, k);
            const double tolerance = error_bound(path, *d, y, m, n, k);
            return std::vector<Expected>{{"y", std::move(y), tolerance}};
          }};
}

// The same product as one call of m rows, as m calls of one row (decode's tile) and as one call
// of rows [first, first + count): every row bit for bit the same.
OpCase row_independence_case(cpu::MatmulPath path, int64_t m, int64_t n, int64_t k, int64_t first, int64_t count) {
  const LazyInputs<Inputs> d([=] { return make_inputs(m, n, k); });
  return {"matmul", shape_name(m, n, k) + " rows alone and rows " + std::to_string(first) + ".." +
                        std::to_string(first + count - 1) + " together",
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {m, k}), w = dev.weight(d->w, DType::kBF16, {n, k});
            Tensor y = dev.poisoned({m, n}), alone = dev.poisoned({m, n}), part = dev.poisoned({count, n});
            return PreparedRun{[&dev, x, w, y]() mutable { dev.backend().matmul(x, w, y); },
                               [&dev, x, w, y, alone, part, m, n, first, count]() mutable {
                                 for (int64_t i = 0; i < m; ++i) {
                                   Tensor row = alone.slice_rows(i, 1);
                                   dev.backend().matmul(x.slice_rows(i, 1), w, row);
                                 }
                                 dev.backend().matmul(x.slice_rows(first, count), w, part);
                                 std::vector<float> all = dev.read(y), one_by_one = dev.read(alone);
                                 // The rows of the full call that the partial call computed.
                                 std::vector<float> same_rows(all.begin() + first * n, all.begin() + (first + count) * n);
                                 return Outputs{all, one_by_one, same_rows, dev.read(part)};
                               }};
          },
          [=] {
            std::vector<float> y = reference::matmul(d->x, d->w, m, n, k);
            const double tolerance = error_bound(path, *d, y, m, n, k);
            std::vector<float> rows(y.begin() + first * n, y.begin() + (first + count) * n);
            return std::vector<Expected>{{"y", y, tolerance},
                                         {"rows one by one", y, tolerance, -1, "y"},
                                         {"y, rows together", rows, tolerance},
                                         {"rows together", rows, tolerance, -1, "y, rows together"}};
          }};
}

}  // namespace

double activation_rounding(cpu::MatmulPath path) {
  switch (path) {
    case cpu::MatmulPath::kAvx2:
    case cpu::MatmulPath::kAvx512: return 0.0;
    case cpu::MatmulPath::kAvx512Bf16: return std::ldexp(1.0, -18);
    case cpu::MatmulPath::kAvx512Bf16Round: return std::ldexp(1.0, -9);
  }
  return 1.0;
}

std::vector<OpCase> matmul_path_cases(cpu::MatmulPath path) {
  std::vector<OpCase> cases;
  // One row: panels of 8 weight rows and what is left (n = 37, 50), k tails of every length
  // class (64 whole chunks, 131 and 15 a masked last chunk, 15 shorter than one).
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 37, 64}, {1, 50, 131}, {1, 9, 15}, {1, 1000, 1024},
           // Tiles of 4 rows by 4 weight rows, remainders of 1 to 3 of each.
           {2, 96, 256}, {3, 17, 40}, {4, 33, 256}, {5, 30, 15}, {7, 20, 19}, {16, 65, 96}, {17, 70, 33},
           // Row blocks of 64: exactly one, one and a row, and several at Qwen3-0.6B's widest k.
           {64, 300, 77}, {65, 40, 1000}, {130, 24, 3072}, {259, 96, 256}, {16, 3072, 1024}}) {
    cases.push_back(product_case(path, m, n, k));
  }
  // Up to 128 rows every path is independent of the rows beside it; the AVX2 path hands more
  // rows to sgemm, the AVX-512 paths are independent at any M.
  cases.push_back(row_independence_case(path, 19, 37, 300, 5, 7));
  if (path != cpu::MatmulPath::kAvx2) cases.push_back(row_independence_case(path, 133, 21, 200, 60, 9));
  return cases;
}

}  // namespace flashq
