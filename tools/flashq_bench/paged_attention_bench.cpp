#include "tools/flashq_bench/paged_attention_bench.h"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <utility>

#include "kernels/dtype.h"

namespace flashq {
namespace {

constexpr int64_t kQHeads = 16, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;

// Values cheap to make and not all alike (the timing does not depend on them).
std::vector<float> pattern(int64_t floats, int64_t salt) {
  std::vector<float> values(static_cast<size_t>(floats));
  for (int64_t i = 0; i < floats; ++i) {
    values[static_cast<size_t>(i)] = static_cast<float>((i * 7919 + salt * 104729) % 2001) * 1e-3f - 1.0f;
  }
  return values;
}

Tensor upload(Backend& backend, const std::vector<float>& values, Shape shape) {
  Tensor t = backend.allocate(DType::kF32, std::move(shape));
  backend.copy_from_host(values.data(), t);
  return t;
}

// The caches' store in `dtype` (float32, or bf16 rounded from the same values).
Tensor upload_cache(Backend& backend, const std::vector<float>& values, Shape shape, DType dtype) {
  if (dtype == DType::kF32) return upload(backend, values, std::move(shape));
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_bf16(values[i]);
  Tensor t = backend.allocate(DType::kBF16, std::move(shape));
  backend.copy_from_host(bits.data(), t);
  return t;
}

Tensor upload_ints(Backend& backend, const std::vector<int32_t>& values) {
  Tensor t = backend.allocate(DType::kI32, {static_cast<int64_t>(values.size())});
  backend.copy_from_host(values.data(), t);
  return t;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// One decode step of `sequences` sequences that have `keys` positions each (the last one the row
// this step stores), both ways.
void report_decode(Backend& backend, const std::string& kernel, const TimePerCall& time, int64_t sequences,
                   int64_t keys, int rounds, DType cache_dtype) {
  const int64_t row_floats = kKvHeads * kHeadDim;
  const int64_t blocks = (keys + kBlockSize - 1) / kBlockSize, capacity = blocks * kBlockSize;
  const Shape row_shape = {sequences, kKvHeads, kHeadDim};
  Tensor q = upload(backend, pattern(sequences * kQHeads * kHeadDim, 1), {sequences, kQHeads, kHeadDim});
  Tensor k = upload(backend, pattern(sequences * row_floats, 2), row_shape);
  Tensor v = upload(backend, pattern(sequences * row_floats, 3), row_shape);
  Tensor out = backend.allocate(DType::kF32, {sequences, kQHeads, kHeadDim});
  Tensor counts =
      upload_ints(backend, std::vector<int32_t>(static_cast<size_t>(sequences), static_cast<int32_t>(keys)));

  // One buffer of every sequence's blocks and one spare, read both ways: contiguous, sequence s
  // holds rows [s * capacity, (s + 1) * capacity) as a cache of its own; paged, its table is a
  // slice of a shuffled order of all the blocks. The new row goes to position keys - 1.
  const int64_t store_blocks = sequences * blocks + 1;
  const Shape store_shape = {store_blocks * kBlockSize, kKvHeads, kHeadDim};
  Tensor store_k = upload_cache(backend, pattern(store_blocks * kBlockSize * row_floats, 4), store_shape, cache_dtype);
  Tensor store_v = upload_cache(backend, pattern(store_blocks * kBlockSize * row_floats, 5), store_shape, cache_dtype);
  std::vector<Tensor> caches;
  caches.reserve(static_cast<size_t>(2 * sequences));  // chunks point into it
  std::vector<CacheChunk> contiguous;
  for (int64_t s = 0; s < sequences; ++s) {
    caches.push_back(store_k.slice_rows(s * capacity, capacity));
    caches.push_back(store_v.slice_rows(s * capacity, capacity));
    contiguous.push_back({&caches[static_cast<size_t>(2 * s)], &caches[static_cast<size_t>(2 * s + 1)], s, 1});
  }
  Tensor contiguous_at =
      upload_ints(backend, std::vector<int32_t>(static_cast<size_t>(sequences), static_cast<int32_t>(keys - 1)));
  std::vector<int32_t> order(static_cast<size_t>(store_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(static_cast<unsigned>(keys + sequences));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Tensor> tables;
  tables.reserve(static_cast<size_t>(sequences));  // chunks point into it
  std::vector<CacheChunk> paged;
  std::vector<int32_t> paged_at;
  for (int64_t s = 0; s < sequences; ++s) {
    const std::vector<int32_t> table(order.begin() + s * blocks, order.begin() + (s + 1) * blocks);
    tables.push_back(upload_ints(backend, table));
    paged.push_back({&store_k, &store_v, s, 1, &tables.back(), kBlockSize});
    const int64_t last = keys - 1;
    paged_at.push_back(
        static_cast<int32_t>(table[static_cast<size_t>(last / kBlockSize)] * kBlockSize + last % kBlockSize));
  }
  Tensor paged_at_t = upload_ints(backend, paged_at);

  std::vector<double> contiguous_s, paged_s, ratios;
  for (int r = 0; r < rounds; ++r) {
    contiguous_s.push_back(time([&] { backend.store_and_attend(q, k, v, contiguous, contiguous_at, counts, out); }));
    paged_s.push_back(time([&] { backend.store_and_attend(q, k, v, paged, paged_at_t, counts, out); }));
    ratios.push_back(paged_s.back() / contiguous_s.back());
  }
  // What a step must read (every key and value once) and compute (q.k and p.v: 2 FLOPs a
  // multiply-add, each query head against each key), for the figures against the floors.
  const double bytes =
      2.0 * static_cast<double>(sequences * keys * row_floats * static_cast<int64_t>(dtype_size(cache_dtype)));
  const double flop = 4.0 * static_cast<double>(sequences * keys * kQHeads * kHeadDim);
  const double contiguous_median = median(contiguous_s), paged_median = median(paged_s);
  std::cout << nlohmann::json{{"kernel", kernel},
                              {"kv_cache_dtype", cache_dtype == DType::kBF16 ? "bf16" : "float32"},
                              {"sequences", sequences},
                              {"keys", keys},
                              {"block_size", kBlockSize},
                              {"q_heads", kQHeads},
                              {"kv_heads", kKvHeads},
                              {"head_dim", kHeadDim},
                              {"rounds", rounds},
                              {"us_contiguous", contiguous_median * 1e6},
                              {"us_paged", paged_median * 1e6},
                              {"mb_read", bytes / 1e6},
                              {"gb_per_s_contiguous", bytes / contiguous_median / 1e9},
                              {"gb_per_s_paged", bytes / paged_median / 1e9},
                              {"gflop_per_s_contiguous", flop / contiguous_median / 1e9},
                              {"gflop_per_s_paged", flop / paged_median / 1e9},
                              {"paged_over_contiguous", median(ratios)}}
                   .dump()
            << std::endl;
}

// A later turn's prefill: `rows` new rows (the last `rows` positions, causal) against a cache of
// `keys` positions, one contiguous cache. GFLOP/s against the arithmetic peak: each new row
// scores every key it sees and adds its value, so the keys are read once for many rows.
void report_prefill(Backend& backend, const std::string& kernel, const TimePerCall& time, int64_t rows, int64_t keys,
                    int rounds, DType cache_dtype) {
  const int64_t row_floats = kKvHeads * kHeadDim;
  Tensor q = upload(backend, pattern(rows * kQHeads * kHeadDim, 1), {rows, kQHeads, kHeadDim});
  Tensor k = upload_cache(backend, pattern(keys * row_floats, 2), {keys, kKvHeads, kHeadDim}, cache_dtype);
  Tensor v = upload_cache(backend, pattern(keys * row_floats, 3), {keys, kKvHeads, kHeadDim}, cache_dtype);
  Tensor out = backend.allocate(DType::kF32, {rows, kQHeads, kHeadDim});
  std::vector<int32_t> counts;
  double pairs = 0;  // (row, key) pairs scored, per query head
  for (int64_t m = 0; m < rows; ++m) {
    counts.push_back(static_cast<int32_t>(keys - rows + 1 + m));
    pairs += static_cast<double>(counts.back());
  }
  Tensor counts_t = upload_ints(backend, counts);
  std::vector<double> seconds;
  for (int r = 0; r < rounds; ++r) seconds.push_back(time([&] { backend.attention(q, k, v, counts_t, out); }));
  const double flop = 4.0 * pairs * kQHeads * kHeadDim, median_s = median(seconds);
  std::cout << nlohmann::json{{"kernel", kernel + "_prefill"},
                              {"kv_cache_dtype", cache_dtype == DType::kBF16 ? "bf16" : "float32"},
                              {"rows", rows},
                              {"keys", keys},
                              {"q_heads", kQHeads},
                              {"kv_heads", kKvHeads},
                              {"head_dim", kHeadDim},
                              {"rounds", rounds},
                              {"us", median_s * 1e6},
                              {"gflop_per_s", flop / median_s / 1e9}}
                   .dump()
            << std::endl;
}

}  // namespace

void report_paged_attention(Backend& backend, const std::string& kernel, const TimePerCall& time,
                            const std::vector<int64_t>& keys_list, int rounds, DType cache_dtype) {
  for (const int64_t keys : keys_list) {
    for (const int64_t sequences : {int64_t{1}, int64_t{16}}) {
      report_decode(backend, kernel, time, sequences, keys, std::max(rounds, 1), cache_dtype);
    }
    report_prefill(backend, kernel, time, std::min<int64_t>(keys, 256), keys, std::max(rounds, 1), cache_dtype);
  }
}

}  // namespace flashq
