#include "tools/flashq_bench/moe_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace flashq {
namespace {

// Weights are spread over more memory than the last-level cache holds, and the calls go round
// them (several copies of one product, several routings of a layer), so they come from memory
// as a model's do.
constexpr int64_t kSpreadBytes = int64_t{256} << 20;
constexpr int kRoutings = 16;

// A host buffer of pseudo-random bytes; MXFP4 scales are kept in 120..124 so values stay finite.
Tensor random_bytes(Shape shape, uint32_t seed, int low = 0, int high = 255) {
  Tensor t = Tensor::zeros_cpu(DType::kU8, std::move(shape));
  uint32_t state = seed * 2654435761u + 1;
  auto* bytes = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    bytes[i] = static_cast<uint8_t>(low + (state >> 24) % static_cast<uint32_t>(high - low + 1));
  }
  return t;
}

LinearWeight mxfp4_weight(int64_t out, int64_t in, uint32_t seed) {
  return {random_bytes({out, in / 2}, seed), random_bytes({out, in / 32}, seed + 1, 120, 124), {}};
}

LinearWeight bf16_weight(int64_t out, int64_t in, uint32_t seed) {
  Tensor w = Tensor::zeros_cpu(DType::kBF16, {out, in});
  uint32_t state = seed;
  for (int64_t i = 0; i < w.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    w.data<uint16_t>()[i] = f32_to_bf16(static_cast<float>(state >> 8) * 0x1p-24f * 0.1f - 0.05f);
  }
  return {w, {}, {}};
}

// The layer's tensors on `backend` (the CPU keeps the host views).
LinearWeight upload(Backend& backend, const LinearWeight& host) {
  LinearWeight w;
  w.weight = backend.upload_weight(host.weight);
  if (host.scales.defined()) w.scales = backend.upload_weight(host.scales);
  if (host.bias.defined()) w.bias = backend.upload_weight(host.bias);
  return w;
}

// A host tensor's copy on `backend`.
Tensor on_backend(Backend& backend, const Tensor& host) {
  Tensor t = backend.allocate(host.dtype(), host.shape());
  backend.copy_from_host(host.raw(), t);
  return t;
}

// Seconds one call of `body` took. The fastest call is reported beside the mean: on a shared
// machine a neighbour only ever slows a call down (a fork-join region waits out its time slice).
template <typename F>
double seconds_of(F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t weight_bytes(const LinearWeight& w) {
  return static_cast<int64_t>(w.weight.nbytes() + (w.mxfp4() ? w.scales.nbytes() : 0) +
                              (w.bias.defined() ? w.bias.nbytes() : 0));
}

// `prefix` names the backend in the kernel names ("" for the CPU, "cuda_"); the fastest call is
// timed on the CPU only (a GPU call returns before it runs).
void report_matmul_mxfp4(Backend& backend, const std::string& prefix, const TimePerCall& time, double read_gb_per_s) {
  struct Product {
    const char* name;
    int64_t n, k;
  };
  for (const Product& p : {Product{"gpt-oss-20b gate_up", 5760, 2880}, Product{"gpt-oss-20b down", 2880, 2880}}) {
    const int64_t bytes = p.n * p.k * 17 / 32;
    const int64_t copies = std::max<int64_t>(kSpreadBytes / bytes, 1);
    std::vector<LinearWeight> weights;
    for (int64_t c = 0; c < copies; ++c) {
      weights.push_back(upload(backend, mxfp4_weight(p.n, p.k, static_cast<uint32_t>(c + 1))));
    }
    for (int64_t m : {1, 4, 16}) {
      Tensor x = backend.allocate(DType::kF32, {m, p.k}), y = backend.allocate(DType::kF32, {m, p.n});
      size_t next = 0;
      double fastest = 1e30;
      const double seconds = time([&] {
        const LinearWeight& w = weights[next++ % weights.size()];
        fastest = std::min(fastest, seconds_of([&] { backend.matmul_mxfp4(x, w.weight, w.scales, y); }));
      });
      const double gb_per_s = static_cast<double>(bytes) / seconds / 1e9;
      nlohmann::json row{{"kernel", prefix + "matmul_mxfp4"},
                         {"shape", p.name},
                         {"m", m},
                         {"n", p.n},
                         {"k", p.k},
                         {"us_per_call", seconds * 1e6},
                         {"weight_bytes", bytes},
                         {"weight_gb_per_s", gb_per_s},
                         {"floor_us", static_cast<double>(bytes) / read_gb_per_s / 1e3},
                         {"fraction_of_read_bandwidth", gb_per_s / read_gb_per_s}};
      if (backend.device() == Device::kCpu) {
        row["us_fastest_call"] = fastest * 1e6;
        row["fraction_of_read_bandwidth_fastest_call"] = static_cast<double>(bytes) / fastest / 1e9 / read_gb_per_s;
      }
      std::cout << row.dump() << std::endl;
    }
  }
}

struct MoeModel {
  const char* name;
  int64_t experts, top_k, hidden, intermediate;
  bool mxfp4;  // else bf16, gate and up separate
};

void report_moe_experts(Backend& backend, const std::string& prefix, const MoeModel& model, const TimePerCall& time,
                        double read_gb_per_s) {
  std::vector<ExpertWeights> experts(static_cast<size_t>(model.experts));
  int64_t expert_bytes = 0;
  for (int64_t e = 0; e < model.experts; ++e) {
    ExpertWeights& w = experts[static_cast<size_t>(e)];
    const auto seed = static_cast<uint32_t>(3 * e + 1);
    if (model.mxfp4) {
      // gpt-oss: interleaved gate_up and down, each with a bias.
      w.gate_up = mxfp4_weight(2 * model.intermediate, model.hidden, seed);
      w.gate_up.bias = Tensor::zeros_cpu(DType::kBF16, {2 * model.intermediate});
      w.down = mxfp4_weight(model.hidden, model.intermediate, seed + 2);
      w.down.bias = Tensor::zeros_cpu(DType::kBF16, {model.hidden});
      expert_bytes = weight_bytes(w.gate_up) + weight_bytes(w.down);
    } else {
      w.gate = bf16_weight(model.intermediate, model.hidden, seed);
      w.up = bf16_weight(model.intermediate, model.hidden, seed + 1);
      w.down = bf16_weight(model.hidden, model.intermediate, seed + 2);
      expert_bytes = weight_bytes(w.gate) + weight_bytes(w.up) + weight_bytes(w.down);
    }
    for (LinearWeight* layer : {&w.gate, &w.up, &w.gate_up, &w.down}) {
      if (layer->weight.defined()) *layer = upload(backend, *layer);
    }
  }
  const ExpertActivation activation{model.mxfp4 ? ExpertActivationKind::kClampedSwiglu : ExpertActivationKind::kSwiglu,
                                    1.702f, 7.0f};
  std::mt19937 rng(7);
  for (int64_t rows : {1, 4, 16}) {
    Tensor x = backend.allocate(DType::kF32, {rows, model.hidden}),
           out = backend.allocate(DType::kF32, {rows, model.hidden});
    Tensor host_weights = Tensor::zeros_cpu(DType::kF32, {rows, model.top_k});
    std::fill(host_weights.data<float>(), host_weights.data<float>() + host_weights.numel(),
              1.0f / static_cast<float>(model.top_k));
    const Tensor weights = on_backend(backend, host_weights);
    // Routings of distinct random experts per row, as a router's top k are.
    std::vector<Tensor> routings;
    double distinct = 0.0;
    std::vector<int32_t> all(static_cast<size_t>(model.experts));
    for (int r = 0; r < kRoutings; ++r) {
      Tensor ids = Tensor::zeros_cpu(DType::kI32, {rows, model.top_k});
      std::set<int32_t> touched;
      for (int64_t m = 0; m < rows; ++m) {
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        for (int64_t j = 0; j < model.top_k; ++j) {
          ids.data<int32_t>()[m * model.top_k + j] = all[static_cast<size_t>(j)];
          touched.insert(all[static_cast<size_t>(j)]);
        }
      }
      distinct += static_cast<double>(touched.size()) / kRoutings;
      routings.push_back(on_backend(backend, ids));
    }
    size_t next = 0;
    double fastest = 1e30;
    const double seconds = time([&] {
      const Tensor& ids = routings[next++ % routings.size()];
      fastest = std::min(fastest, seconds_of([&] { backend.moe_experts(x, ids, weights, experts, activation, out); }));
    });
    const double bytes = distinct * static_cast<double>(expert_bytes);
    const double gb_per_s = bytes / seconds / 1e9;
    nlohmann::json row{{"kernel", prefix + "moe_experts"},
                       {"model", model.name},
                       {"weights", model.mxfp4 ? "mxfp4" : "bf16"},
                       {"experts", model.experts},
                       {"top_k", model.top_k},
                       {"hidden", model.hidden},
                       {"intermediate", model.intermediate},
                       {"rows", rows},
                       {"distinct_experts", distinct},
                       {"bytes_read", bytes},
                       {"us_per_call", seconds * 1e6},
                       {"weight_gb_per_s", gb_per_s},
                       {"floor_us", bytes / read_gb_per_s / 1e3},
                       {"fraction_of_read_bandwidth", gb_per_s / read_gb_per_s}};
    if (backend.device() == Device::kCpu) {
      row["us_fastest_call"] = fastest * 1e6;
      row["fraction_of_read_bandwidth_fastest_call"] = bytes / fastest / 1e9 / read_gb_per_s;
    }
    std::cout << row.dump() << std::endl;
  }
}

}  // namespace

void report_moe(Backend& backend, const TimePerCall& time, double floor_gb_per_s) {
  const std::string prefix = backend.device() == Device::kCpu ? "" : backend.name() + "_";
  report_matmul_mxfp4(backend, prefix, time, floor_gb_per_s);
  report_moe_experts(backend, prefix, {"gpt-oss-20b", 32, 4, 2880, 2880, true}, time, floor_gb_per_s);
  report_moe_experts(backend, prefix, {"qwen3-30b-a3b", 128, 8, 2048, 768, false}, time, floor_gb_per_s);
}

}  // namespace flashq
