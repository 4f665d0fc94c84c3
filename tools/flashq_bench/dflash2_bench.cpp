#include "tools/flashq_bench/dflash2_bench.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

namespace flashq {
namespace {

constexpr int64_t kHidden = 1024, kVocab = 151936, kTaps = 2, kGroupSize = 16, kTopK = 16, kRank = 256;

Tensor random_tensor(Backend& backend, Shape shape, std::mt19937& rng) {
  Tensor t = backend.allocate(DType::kF32, std::move(shape));
  std::vector<float> values(static_cast<size_t>(t.numel()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : values) x = dist(rng);
  backend.copy_from_host(values.data(), t);
  return t;
}

void print(const std::string& kernel, int64_t rows, double seconds, double bytes) {
  std::cout << nlohmann::json{{"kernel", kernel},
                              {"rows", rows},
                              {"us_per_call", seconds * 1e6},
                              {"gb_per_s", bytes / seconds / 1e9}}
                   .dump()
            << std::endl;
}

}  // namespace

void report_dflash2_ops(Backend& backend, const std::string& prefix, const TimePerCall& time) {
  std::mt19937 rng(11);
  const int64_t groups = kHidden / kGroupSize;
  for (const int64_t blocks : {int64_t{1}, int64_t{8}}) {
    const int64_t rows = 15 * blocks;  // a block of 16 drafts 15 rows
    Tensor x = random_tensor(backend, {rows, kHidden}, rng), out = backend.allocate(DType::kF32, {rows, kHidden});
    Tensor dynamic = random_tensor(backend, {rows, kTaps * groups}, rng);
    Tensor base = backend.allocate(DType::kBF16, {kTaps, kHidden});
    std::vector<int32_t> row_in_block;
    for (int64_t r = 0; r < rows; ++r) row_in_block.push_back(static_cast<int32_t>(r % 15));
    Tensor rows_in_block = backend.allocate(DType::kI32, {rows});
    backend.copy_from_host(row_in_block.data(), rows_in_block);
    const double conv = time([&] { backend.grouped_dynamic_conv(x, dynamic, base, rows_in_block, kGroupSize, out); });
    print(prefix + "grouped_dynamic_conv", rows, conv, static_cast<double>(2 * x.nbytes() + dynamic.nbytes()));

    Tensor logits = random_tensor(backend, {rows, kVocab}, rng);
    Tensor values = backend.allocate(DType::kF32, {rows, kTopK}), ids = backend.allocate(DType::kI32, {rows, kTopK});
    const double top_k = time([&] { backend.top_k(logits, values, ids); });
    print(prefix + "top_k", rows, top_k, static_cast<double>(logits.nbytes()));

    Tensor a = random_tensor(backend, {rows * kTopK, kRank}, rng),
           b = random_tensor(backend, {rows * kTopK, kRank}, rng);
    Tensor h = random_tensor(backend, {rows, kRank}, rng), pairs = backend.allocate(DType::kF32, {rows, kTopK, kTopK});
    const double pair = time([&] { backend.selector_pair_scores(a, h, b, pairs); });
    print(prefix + "selector_pair_scores", rows, pair, static_cast<double>(a.nbytes() + b.nbytes() + h.nbytes()));
  }
}

}  // namespace flashq
