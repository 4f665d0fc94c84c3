// The table's products, norms and element-wise ops: decode (M = 1), blocks (M = 16), odd sizes
// that miss every vector width, each weight dtype, inputs off alignment. Tolerances relative to
// the largest reference value: products 1e-4 with f32 weights and 1e-2 with bf16/f16 weights
// (tolerance_for), norms 1e-4, element-wise 1e-5 or 1e-6.
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

std::string dims(const std::vector<std::pair<const char*, int64_t>>& named) {
  std::string text;
  for (const auto& [name, value] : named)
    text += std::string(text.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return text;
}

// ---- matmul ----

OpCase matmul_case(DType dtype, int64_t m, int64_t n, int64_t k) {
  struct Data {
    std::vector<float> x, w;
  };
  const LazyInputs<Data> d([=] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 7 + k));
    made.x = random_floats(static_cast<size_t>(m * k), rng);
    made.w = random_floats(static_cast<size_t>(n * k), rng, 0.5f);
    round_to(dtype, made.w);
    return made;
  });
  return {"matmul", std::string(dtype_name(dtype)) + " " + dims({{"m", m}, {"n", n}, {"k", k}}),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {m, k}), w = dev.weight(d->w, dtype, {n, k}), y = dev.poisoned({m, n});
            return PreparedRun{[&dev, x, w, y]() mutable { dev.backend().matmul(x, w, y); },
                               [&dev, y] { return Outputs{dev.read(y)}; }};
          },
          [=] {
            return std::vector<Expected>{{"y", reference::matmul(d->x, d->w, m, n, k), tolerance_for(dtype)}};
          }};
}

void add_matmul_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t m : {1, 2, 7, 8, 9, 16, 17, 64, 128, 129, 259}) {
      cases.push_back(matmul_case(dtype, m, 96, 256));  // vector path, whole tiles
      cases.push_back(matmul_case(dtype, m, 33, 100));  // k not a multiple of 8: scalar path; n not of 8 warps
    }
    cases.push_back(matmul_case(dtype, 1, 1000, 1024));
    cases.push_back(matmul_case(dtype, 16, 3072, 1024));
    cases.push_back(matmul_case(dtype, 300, 512, 1024));  // prefill: cuBLAS on a GPU (bf16, f32)
  }
}

// ---- matmul_many: q, k and v shapes (odd n leaves partial tiles), and a drafter's 2 x 9 layers
// of k and v, more products than one launch takes. Each product also bit for bit matmul alone.

OpCase matmul_many_case(DType dtype, int64_t m, const std::vector<int64_t>& widths) {
  const int64_t k = 256;
  struct Data {
    std::vector<float> x;
    std::vector<std::vector<float>> w;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(11 + m * 13 + static_cast<int64_t>(widths.size())));
  d->x = random_floats(static_cast<size_t>(m * k), rng);
  for (int64_t n : widths) {
    d->w.push_back(random_floats(static_cast<size_t>(n * k), rng, 0.5f));
    round_to(dtype, d->w.back());
  }
  return {"matmul_many",
          std::string(dtype_name(dtype)) + " " + dims({{"m", m}, {"products", static_cast<int64_t>(widths.size())}}),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {m, k});
            std::vector<Tensor> w, y, alone;
            for (size_t i = 0; i < widths.size(); ++i) {
              w.push_back(dev.weight(d->w[i], dtype, {widths[i], k}));
              y.push_back(dev.poisoned({m, widths[i]}));
              alone.push_back(dev.poisoned({m, widths[i]}));
            }
            auto tensors = std::make_shared<std::vector<Tensor>>(std::move(y));
            auto weights = std::make_shared<std::vector<Tensor>>(std::move(w));
            return PreparedRun{[&dev, x, tensors, weights] {
                                 std::vector<WeightProduct> products;
                                 for (size_t i = 0; i < weights->size(); ++i)
                                   products.push_back({&(*weights)[i], &(*tensors)[i]});
                                 dev.backend().matmul_many(x, products);
                               },
                               [&dev, x, tensors, weights, alone]() mutable {
                                 Outputs out;
                                 for (size_t i = 0; i < weights->size(); ++i) {
                                   dev.backend().matmul(x, (*weights)[i], alone[i]);
                                   out.push_back(dev.read((*tensors)[i]));
                                   out.push_back(dev.read(alone[i]));
                                 }
                                 return out;
                               }};
          },
          [=] {
            std::vector<Expected> expected;
            for (size_t i = 0; i < widths.size(); ++i) {
              const std::string product = "product " + std::to_string(i);
              std::vector<float> y = reference::matmul(d->x, d->w[i], m, widths[i], k);
              expected.push_back({product, y, tolerance_for(dtype)});
              expected.push_back({product + " by matmul", y, tolerance_for(dtype), -1, product});
            }
            return expected;
          }};
}

// ---- matmul_swiglu: n = 76 leaves a partial block of 8; K = 320 takes a GPU's tensor-core
// kernel, K = 100 does not. Also bit for bit matmul, matmul, swiglu.

OpCase matmul_swiglu_case(DType dtype, int64_t m, int64_t k) {
  const int64_t n = 76;
  struct Data {
    std::vector<float> x, gate, up;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(13 + m * 7 + k));
  d->x = random_floats(static_cast<size_t>(m * k), rng);
  d->gate = random_floats(static_cast<size_t>(n * k), rng, 0.5f);
  d->up = random_floats(static_cast<size_t>(n * k), rng, 0.5f);
  round_to(dtype, d->gate);
  round_to(dtype, d->up);
  return {"matmul_swiglu", std::string(dtype_name(dtype)) + " " + dims({{"m", m}, {"n", n}, {"k", k}}),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {m, k});
            Tensor gate = dev.weight(d->gate, dtype, {n, k}), up = dev.weight(d->up, dtype, {n, k});
            Tensor out = dev.poisoned({m, n}), scratch = dev.poisoned({m, n});
            Tensor gate_out = dev.poisoned({m, n}), up_out = dev.poisoned({m, n});
            return PreparedRun{
                [&dev, x, gate, up, out, scratch]() mutable { dev.backend().matmul_swiglu(x, gate, up, out, scratch); },
                [&dev, x, gate, up, out, gate_out, up_out]() mutable {
                  dev.backend().matmul(x, gate, gate_out);
                  dev.backend().matmul(x, up, up_out);
                  dev.backend().swiglu(gate_out, up_out, gate_out);
                  return Outputs{dev.read(out), dev.read(gate_out)};
                }};
          },
          [=] {
            const std::vector<float> out =
                reference::swiglu(reference::matmul(d->x, d->gate, m, n, k), reference::matmul(d->x, d->up, m, n, k));
            return std::vector<Expected>{{"out", out, tolerance_for(dtype)},
                                         {"by matmul, matmul, swiglu", out, tolerance_for(dtype), -1, "out"}};
          }};
}

// ---- norms: rows of a multiple of 4 floats up to 16384, 16-byte aligned, take a GPU's float4
// kernel; other dims, and x 4 bytes off alignment, the one that loops over the row.

struct NormShape {
  DType w_dtype;
  int64_t rows, dim;
  bool misaligned = false;
};

std::string norm_name(const NormShape& s) {
  return std::string(dtype_name(s.w_dtype)) + " " + dims({{"rows", s.rows}, {"dim", s.dim}}) +
         (s.misaligned ? " misaligned" : "");
}

OpCase rmsnorm_case(const NormShape& s) {
  struct Data {
    std::vector<float> x, w;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(s.rows * 17 + s.dim));
  d->x = random_floats(static_cast<size_t>(s.rows * s.dim), rng, 3.0f);
  d->w = random_floats(static_cast<size_t>(s.dim), rng, 2.0f);
  round_to(s.w_dtype, d->w);
  return {"rmsnorm", norm_name(s),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, DType::kF32, {s.rows, s.dim}, s.misaligned);
            Tensor w = dev.weight(d->w, s.w_dtype, {s.dim}), y = dev.poisoned({s.rows, s.dim});
            // In place too, as the per-head q and k norms run.
            Tensor in_place = dev.upload(d->x, DType::kF32, {s.rows, s.dim}, s.misaligned);
            return PreparedRun{[&dev, x, w, y]() mutable { dev.backend().rmsnorm(x, w, 1e-6f, y); },
                               [&dev, w, y, in_place]() mutable {
                                 dev.backend().rmsnorm(in_place, w, 1e-6f, in_place);
                                 return Outputs{dev.read(y), dev.read(in_place)};
                               }};
          },
          [=] {
            const std::vector<float> y = reference::rmsnorm(d->x, d->w, s.dim, 1e-6f);
            return std::vector<Expected>{{"y", y, 1e-4}, {"in place", y, 1e-4}};
          }};
}

OpCase add_rmsnorm_case(const NormShape& s) {
  struct Data {
    std::vector<float> h, delta, w;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(s.rows * 19 + s.dim));
  d->h = random_floats(static_cast<size_t>(s.rows * s.dim), rng, 3.0f);
  d->delta = random_floats(static_cast<size_t>(s.rows * s.dim), rng);
  d->w = random_floats(static_cast<size_t>(s.dim), rng, 2.0f);
  round_to(s.w_dtype, d->w);
  return {"add_rmsnorm", norm_name(s),
          [=](OpDevice& dev) {
            Tensor h = dev.upload(d->h, DType::kF32, {s.rows, s.dim}, s.misaligned);
            Tensor delta = dev.upload(d->delta, {s.rows, s.dim}), w = dev.weight(d->w, s.w_dtype, {s.dim});
            Tensor y = dev.poisoned({s.rows, s.dim});
            // h is read back after the first launch only: timing adds delta again.
            return PreparedRun{[&dev, h, delta, w, y]() mutable { dev.backend().add_rmsnorm(h, delta, w, 1e-6f, y); },
                               [&dev, h, y] {
                                 return Outputs{dev.read(h), dev.read(y)};
                               }};
          },
          [=] {
            const std::vector<float> h = reference::add(d->h, d->delta);
            return std::vector<Expected>{{"residual h + delta", h, 1e-6},
                                         {"y", reference::rmsnorm(h, d->w, s.dim, 1e-6f), 1e-4}};
          }};
}

void add_norm_cases(std::vector<OpCase>& cases) {
  std::vector<NormShape> shapes;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t rows : {1, 16, 33}) {
      for (int64_t dim : {16, 128, 1000, 4096}) shapes.push_back({dtype, rows, dim});
    }
  }
  shapes.push_back({DType::kBF16, 512, 7});  // shorter than a warp
  shapes.push_back({DType::kBF16, 3, 4098});
  shapes.push_back({DType::kBF16, 3, 16384});  // the float4 kernel's longest row
  shapes.push_back({DType::kF32, 2, 20000});
  shapes.push_back({DType::kBF16, 16, 4096, true});
  shapes.push_back({DType::kF32, 1, 1000, true});
  for (const NormShape& s : shapes) cases.push_back(rmsnorm_case(s));
  for (const NormShape& s : shapes) cases.push_back(add_rmsnorm_case(s));
}

// ---- element-wise ----

OpCase add_case(int64_t count) {
  struct Data {
    std::vector<float> h, delta;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(7 + count));
  d->h = random_floats(static_cast<size_t>(count), rng);
  d->delta = random_floats(static_cast<size_t>(count), rng);
  return {"add", dims({{"count", count}}),
          [=](OpDevice& dev) {
            Tensor h = dev.upload(d->h, {count}), delta = dev.upload(d->delta, {count});
            return PreparedRun{[&dev, h, delta]() mutable { dev.backend().add(h, delta); },
                               [&dev, h] { return Outputs{dev.read(h)}; }};
          },
          [=] {
            return std::vector<Expected>{{"h + delta", reference::add(d->h, d->delta), 1e-6}};
          }};
}

OpCase swiglu_case(int64_t count) {
  struct Data {
    std::vector<float> gate, up;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(8 + count));
  d->gate = random_floats(static_cast<size_t>(count), rng, 6.0f);
  d->up = random_floats(static_cast<size_t>(count), rng, 2.0f);
  return {"swiglu", dims({{"count", count}}),
          [=](OpDevice& dev) {
            Tensor gate = dev.upload(d->gate, {count}), up = dev.upload(d->up, {count}), out = dev.poisoned({count});
            Tensor gate_in_place = dev.upload(d->gate, {count});  // the MLP writes into its gate buffer
            return PreparedRun{[&dev, gate, up, out]() mutable { dev.backend().swiglu(gate, up, out); },
                               [&dev, up, out, gate_in_place]() mutable {
                                 dev.backend().swiglu(gate_in_place, up, gate_in_place);
                                 return Outputs{dev.read(out), dev.read(gate_in_place)};
                               }};
          },
          [=] {
            const std::vector<float> out = reference::swiglu(d->gate, d->up);
            return std::vector<Expected>{{"out", out, 1e-5}, {"in place", out, 1e-5}};
          }};
}

}  // namespace

std::vector<OpCase> dense_op_cases() {
  std::vector<OpCase> cases;
  add_matmul_cases(cases);
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t m : {1, 5, 16, 17, 64, 128, 129}) {
      cases.push_back(matmul_many_case(dtype, m, {96, 40, 40}));
      cases.push_back(matmul_many_case(dtype, m, std::vector<int64_t>(18, 24)));
    }
    for (int64_t k : {320, 100}) {
      for (int64_t m : {1, 3, 16, 40, 128, 129}) cases.push_back(matmul_swiglu_case(dtype, m, k));
    }
  }
  add_norm_cases(cases);
  for (int64_t count : {1, 1000, 70001}) cases.push_back(add_case(count));
  for (int64_t count : {1, 3072, 70001}) cases.push_back(swiglu_case(count));
  return cases;
}

}  // namespace flashq
