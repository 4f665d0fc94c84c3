// The table's cases for the mixture-of-experts ops and MXFP4 weights: matmul_mxfp4 (random blocks
// with scales in the range checkpoints hold, at decode, verification and prefill row counts, the
// last past the CPU's streaming limit), linear (dense and MXFP4, with and without a bias),
// moe_route (both orders, normalised or not, rows full of ties) and moe_experts (dense bf16 and
// MXFP4 experts, separate and interleaved gate/up, both activations, biases or none, experts that
// get every row and experts that get none). References: tests/kernels/op_reference_moe.h.
// Tolerances: 1e-4 normalised for float32 sums against double; ids exact.
#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference_moe.h"

namespace flashq {
namespace {

constexpr double kTolerance = 1e-4;

std::string shape_name(std::initializer_list<std::pair<const char*, int64_t>> dims) {
  std::string name;
  for (const auto& [label, value] : dims)
    name += (name.empty() ? "" : " ") + std::string(label) + "=" + std::to_string(value);
  return name;
}

std::vector<float> random_bytes(size_t n, std::mt19937& rng, int low, int high) {
  std::uniform_int_distribution<int> byte(low, high);
  std::vector<float> v(n);
  for (float& b : v) b = static_cast<float>(byte(rng));
  return v;
}

std::vector<uint8_t> as_bytes(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// A linear layer's host values: what is uploaded (dense values of `dtype`, or MXFP4 blocks and
// scales as bytes) and the dense weights the reference multiplies by.
struct HostLinear {
  bool mxfp4 = false;
  DType dtype = DType::kBF16;
  std::vector<float> weight, scales, bias;
  reference::DenseLinear dense;
};

HostLinear random_linear(int64_t out, int64_t in, bool mxfp4, DType dtype, bool with_bias, std::mt19937& rng,
                         float dense_scale) {
  HostLinear l;
  l.mxfp4 = mxfp4;
  l.dtype = dtype;
  l.dense.out = out;
  l.dense.in = in;
  if (mxfp4) {
    l.weight = random_bytes(static_cast<size_t>(out * in / 2), rng, 0, 255);
    l.scales = random_bytes(static_cast<size_t>(out * in / 32), rng, 118, 126);
    l.dense.w = reference::decode_mxfp4(as_bytes(l.weight), as_bytes(l.scales), out, in);
  } else {
    l.weight = random_floats(static_cast<size_t>(out * in), rng, dense_scale);
    round_to(dtype, l.weight);
    l.dense.w = l.weight;
  }
  if (with_bias) {
    l.bias = random_floats(static_cast<size_t>(out), rng, 0.5f);
    round_to(DType::kBF16, l.bias);
    l.dense.bias = l.bias;
  }
  return l;
}

LinearWeight upload_linear(OpDevice& dev, const HostLinear& l) {
  LinearWeight w;
  const int64_t out = l.dense.out, in = l.dense.in;
  if (l.mxfp4) {
    w.weight = dev.weight(l.weight, DType::kU8, {out, in / 2});
    w.scales = dev.weight(l.scales, DType::kU8, {out, in / 32});
  } else {
    w.weight = dev.weight(l.weight, l.dtype, {out, in});
  }
  if (!l.bias.empty()) w.bias = dev.weight(l.bias, DType::kBF16, {out});
  return w;
}

// ---- matmul_mxfp4 and linear ----

OpCase matmul_mxfp4_case(int64_t m, int64_t n, int64_t k, int scale_low, int scale_high) {
  struct Data {
    std::vector<float> x, blocks, scales;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 7 + k));
  d->x = random_floats(static_cast<size_t>(m * k), rng);
  d->blocks = random_bytes(static_cast<size_t>(n * k / 2), rng, 0, 255);
  d->scales = random_bytes(static_cast<size_t>(n * k / 32), rng, scale_low, scale_high);
  return {"matmul_mxfp4",
          shape_name({{"m", m}, {"n", n}, {"k", k}}) + " scales " + std::to_string(scale_low) + ".." +
              std::to_string(scale_high),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {m, k});
            Tensor blocks = dev.weight(d->blocks, DType::kU8, {n, k / 2});
            Tensor scales = dev.weight(d->scales, DType::kU8, {n, k / 32});
            Tensor y = dev.poisoned({m, n});
            return PreparedRun{
                [&dev, x, blocks, scales, y]() mutable { dev.backend().matmul_mxfp4(x, blocks, scales, y); },
                [&dev, y] { return Outputs{dev.read(y)}; }};
          },
          [=] {
            const std::vector<float> w = reference::decode_mxfp4(as_bytes(d->blocks), as_bytes(d->scales), n, k);
            std::vector<float> y;
            for (int64_t r = 0; r < m; ++r) {
              for (double v : reference::linear_row(d->x.data() + r * k, {w, {}, n, k}))
                y.push_back(static_cast<float>(v));
            }
            return std::vector<Expected>{{"y", y, kTolerance}};
          }};
}

OpCase linear_case(int64_t m, int64_t n, int64_t k, bool mxfp4, bool with_bias) {
  struct Data {
    std::vector<float> x;
    HostLinear layer;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(m * 17 + n * 5 + k + (mxfp4 ? 1 : 0)));
  d->x = random_floats(static_cast<size_t>(m * k), rng);
  d->layer = random_linear(n, k, mxfp4, DType::kBF16, with_bias, rng, 0.5f);
  return {"linear",
          std::string(mxfp4 ? "mxfp4" : "BF16") + (with_bias ? " +bias " : " ") +
              shape_name({{"m", m}, {"n", n}, {"k", k}}),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {m, k});
            LinearWeight w = upload_linear(dev, d->layer);
            Tensor y = dev.poisoned({m, n});
            return PreparedRun{[&dev, x, w, y]() mutable { dev.backend().linear(x, w, y); },
                               [&dev, y] { return Outputs{dev.read(y)}; }};
          },
          [=] {
            std::vector<float> y;
            for (int64_t r = 0; r < m; ++r) {
              for (double v : reference::linear_row(d->x.data() + r * k, d->layer.dense))
                y.push_back(static_cast<float>(v));
            }
            return std::vector<Expected>{{"y", y, kTolerance}};
          }};
}

// ---- moe_route ----

OpCase moe_route_case(int64_t rows, int64_t experts, int64_t top_k, RoutingOrder order, bool normalize) {
  auto logits = std::make_shared<std::vector<float>>();
  std::mt19937 rng(static_cast<unsigned>(rows * 3 + experts * 11 + top_k));
  *logits = random_floats(static_cast<size_t>(rows * experts), rng, 4.0f);
  for (int64_t m = 0; m < rows; ++m) {
    float* row = logits->data() + m * experts;
    if (m % 3 == 1) {
      for (int64_t e = 0; e < experts; ++e) row[e] = std::round(row[e] / 2.0f);  // many ties, some across the cut
    } else if (m % 3 == 2 && m % 2 == 0) {
      std::fill(row, row + experts, 0.25f);  // all tied: experts 0..k-1, equal weights
    }
  }
  const bool softmax_first = order == RoutingOrder::kSoftmaxThenTopK;
  const MoeRouting routing{top_k, order, normalize};
  return {"moe_route",
          std::string(softmax_first ? "softmax-then-topk" : "topk-then-softmax") + (normalize ? " normalized " : " ") +
              shape_name({{"rows", rows}, {"experts", experts}, {"k", top_k}}),
          [=](OpDevice& dev) {
            Tensor l = dev.upload(*logits, {rows, experts});
            Tensor ids = dev.poisoned_ints(rows * top_k).reshape({rows, top_k});
            Tensor weights = dev.poisoned({rows, top_k});
            return PreparedRun{
                [&dev, l, routing, ids, weights]() mutable { dev.backend().moe_route(l, routing, ids, weights); },
                [&dev, ids, weights] {
                  return Outputs{dev.read(ids), dev.read(weights)};
                }};
          },
          [=] {
            const reference::Routing r = reference::moe_route(*logits, experts, top_k, softmax_first, normalize);
            return std::vector<Expected>{{"expert_ids", as_floats(r.ids)}, {"expert_weights", r.weights, 1e-5}};
          }};
}

// ---- moe_experts ----

enum class Spread {
  kRandom,       // k distinct experts of all E per row
  kConcentrated  // every row among experts 0..k (one more than k): the rest get none
};

struct ExpertsShape {
  int64_t rows, experts, top_k, hidden, intermediate;
  bool mxfp4, interleaved, clamped, biases;
  Spread spread = Spread::kRandom;
};

OpCase moe_experts_case(const ExpertsShape& s) {
  struct Data {
    std::vector<float> x, weights;
    std::vector<int32_t> ids;
    std::vector<HostLinear> gate, up, gate_up, down;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(s.rows * 7 + s.experts * 13 + s.top_k + s.hidden + (s.mxfp4 ? 3 : 0) +
                                         (s.interleaved ? 5 : 0)));
  d->x = random_floats(static_cast<size_t>(s.rows * s.hidden), rng);
  const int64_t pool = s.spread == Spread::kRandom ? s.experts : s.top_k + 1;
  std::vector<int32_t> candidates(static_cast<size_t>(pool));
  std::uniform_real_distribution<float> weight(0.05f, 1.0f);
  for (int64_t m = 0; m < s.rows; ++m) {
    std::iota(candidates.begin(), candidates.end(), 0);
    std::shuffle(candidates.begin(), candidates.end(), rng);
    for (int64_t j = 0; j < s.top_k; ++j) {
      d->ids.push_back(candidates[static_cast<size_t>(j)]);
      d->weights.push_back(weight(rng));
    }
  }
  for (int64_t e = 0; e < s.experts; ++e) {
    if (s.interleaved) {
      d->gate_up.push_back(random_linear(2 * s.intermediate, s.hidden, s.mxfp4, DType::kBF16, s.biases, rng, 1.0f));
    } else {
      d->gate.push_back(random_linear(s.intermediate, s.hidden, s.mxfp4, DType::kBF16, s.biases, rng, 1.0f));
      d->up.push_back(random_linear(s.intermediate, s.hidden, s.mxfp4, DType::kBF16, s.biases, rng, 1.0f));
    }
    d->down.push_back(random_linear(s.hidden, s.intermediate, s.mxfp4, DType::kBF16, s.biases, rng, 0.5f));
  }
  const ExpertActivation activation{s.clamped ? ExpertActivationKind::kClampedSwiglu : ExpertActivationKind::kSwiglu,
                                    1.702f, 7.0f};
  const std::string name =
      std::string(s.mxfp4 ? "mxfp4" : "BF16") + (s.interleaved ? " gate_up" : " gate+up") +
      (s.clamped ? " clamped" : " swiglu") + (s.biases ? " +bias" : "") +
      (s.spread == Spread::kConcentrated ? " concentrated " : " ") +
      shape_name({{"rows", s.rows}, {"E", s.experts}, {"k", s.top_k}, {"H", s.hidden}, {"I", s.intermediate}});
  return {
      "moe_experts", name,
      [=](OpDevice& dev) {
        Tensor x = dev.upload(d->x, {s.rows, s.hidden});
        Tensor ids = dev.ints(d->ids).reshape({s.rows, s.top_k});
        Tensor weights = dev.upload(d->weights, {s.rows, s.top_k});
        Tensor out = dev.poisoned({s.rows, s.hidden});
        auto experts = std::make_shared<std::vector<ExpertWeights>>();
        for (int64_t e = 0; e < s.experts; ++e) {
          const auto i = static_cast<size_t>(e);
          ExpertWeights w;
          if (s.interleaved) {
            w.gate_up = upload_linear(dev, d->gate_up[i]);
          } else {
            w.gate = upload_linear(dev, d->gate[i]);
            w.up = upload_linear(dev, d->up[i]);
          }
          w.down = upload_linear(dev, d->down[i]);
          experts->push_back(w);
        }
        return PreparedRun{[&dev, x, ids, weights, experts, activation, out]() mutable {
                             dev.backend().moe_experts(x, ids, weights, *experts, activation, out);
                           },
                           [&dev, out] { return Outputs{dev.read(out)}; }};
      },
      [=] {
        std::vector<reference::DenseExpert> experts;
        for (int64_t e = 0; e < s.experts; ++e) {
          const auto i = static_cast<size_t>(e);
          reference::DenseExpert x;
          x.interleaved = s.interleaved;
          if (s.interleaved) {
            x.gate_up = d->gate_up[i].dense;
          } else {
            x.gate = d->gate[i].dense;
            x.up = d->up[i].dense;
          }
          x.down = d->down[i].dense;
          experts.push_back(std::move(x));
        }
        return std::vector<Expected>{{"out",
                                      reference::moe_experts(d->x, s.rows, s.hidden, d->ids, d->weights, s.top_k,
                                                             experts, s.clamped, activation.alpha, activation.limit),
                                      kTolerance}};
      }};
}

}  // namespace

std::vector<OpCase> moe_op_cases() {
  std::vector<OpCase> cases;
  // gpt-oss-like widths, scaled down; 130 rows cross the CPU's streaming limit (128).
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 64, 128}, {4, 40, 96}, {16, 33, 64}, {64, 24, 256}, {130, 20, 64}, {3, 7, 32}}) {
    cases.push_back(matmul_mxfp4_case(m, n, k, 115, 130));
  }
  cases.push_back(matmul_mxfp4_case(5, 16, 64, 90, 160));  // exponents far from 1

  cases.push_back(linear_case(4, 48, 64, false, true));
  cases.push_back(linear_case(4, 48, 64, true, true));
  cases.push_back(linear_case(1, 40, 96, true, false));

  for (int64_t rows : {1, 4, 16, 64}) {
    cases.push_back(moe_route_case(rows, 32, 4, RoutingOrder::kTopKThenSoftmax, false));
    cases.push_back(moe_route_case(rows, 128, 8, RoutingOrder::kSoftmaxThenTopK, true));
  }
  cases.push_back(moe_route_case(16, 128, 8, RoutingOrder::kSoftmaxThenTopK, false));
  cases.push_back(moe_route_case(4, 8, 8, RoutingOrder::kSoftmaxThenTopK, false));  // k = E
  cases.push_back(moe_route_case(4, 8, 1, RoutingOrder::kTopKThenSoftmax, false));

  // Qwen3-MoE-like: bf16, separate gate and up, SwiGLU, no biases.
  for (int64_t rows : {1, 4, 16, 64}) {
    cases.push_back(moe_experts_case({rows, 16, 4, 64, 32, false, false, false, false}));
  }
  // gpt-oss-like: MXFP4, interleaved gate_up, clamped SwiGLU, biases.
  for (int64_t rows : {1, 4, 16, 64}) {
    cases.push_back(moe_experts_case({rows, 8, 4, 64, 64, true, true, true, true}));
  }
  // The other combinations, and routings where some experts get every row and the rest none.
  cases.push_back(moe_experts_case({4, 8, 2, 64, 32, true, false, false, true}));
  cases.push_back(moe_experts_case({4, 8, 2, 32, 64, false, true, true, false}));
  cases.push_back(moe_experts_case({16, 8, 2, 64, 32, false, true, false, true, Spread::kConcentrated}));
  cases.push_back(moe_experts_case({16, 32, 4, 32, 32, true, true, true, true, Spread::kConcentrated}));
  cases.push_back(moe_experts_case({8, 4, 4, 32, 32, true, false, true, false}));  // k = E: every expert every row
  return cases;
}

}  // namespace flashq
