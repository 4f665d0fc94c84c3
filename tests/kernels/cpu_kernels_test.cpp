// The fast CPU kernels against plain double-precision twins on random inputs, over shapes that
// hit every code path (row groups, leftover rows, k tails, the sgemm panel path).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"
#include "shared/error.h"

namespace flashq {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor tensor_from(const std::vector<float>& values, Shape shape) {
  Tensor t = Tensor::zeros_cpu(DType::kF32, std::move(shape));
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

// Weights in `dtype` holding `values` rounded to that dtype; `values` is updated to the rounded
// numbers so the reference sees exactly what the kernel sees.
Tensor weight_from(std::vector<float>& values, DType dtype, Shape shape) {
  Tensor t = Tensor::zeros_cpu(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      t.data<float>()[i] = values[i];
    } else if (dtype == DType::kBF16) {
      t.data<uint16_t>()[i] = f32_to_bf16(values[i]);
      values[i] = bf16_to_f32(t.data<uint16_t>()[i]);
    } else {
      t.data<uint16_t>()[i] = f32_to_f16(values[i]);
      values[i] = f16_to_f32(t.data<uint16_t>()[i]);
    }
  }
  return t;
}

double max_normalized_error(const float* got, const std::vector<double>& want) {
  double scale = 1e-30, worst = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst / scale;
}

struct MatmulCase {
  DType dtype;
  int64_t m, n, k;
};

class MatmulParity : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulParity, MatchesDoublePrecisionTwin) {
  const MatmulCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 7 + c.k));
  std::vector<float> x = random_floats(static_cast<size_t>(c.m * c.k), rng);
  std::vector<float> w = random_floats(static_cast<size_t>(c.n * c.k), rng, 0.5f);
  Tensor wt = weight_from(w, c.dtype, {c.n, c.k});
  std::vector<float> y(static_cast<size_t>(c.m * c.n));
  cpu::matmul(x.data(), wt.raw(), c.dtype, y.data(), c.m, c.n, c.k);

  std::vector<double> want(y.size());
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < c.k; ++p) sum += static_cast<double>(x[i * c.k + p]) * w[j * c.k + p];
      want[i * c.n + j] = sum;
    }
  }
  EXPECT_LT(max_normalized_error(y.data(), want), 1e-5)
      << dtype_name(c.dtype) << " m=" << c.m << " n=" << c.n << " k=" << c.k;
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulParity,
                         ::testing::Values(MatmulCase{DType::kBF16, 1, 37, 64}, MatmulCase{DType::kBF16, 1, 50, 131},
                                           MatmulCase{DType::kBF16, 3, 17, 40}, MatmulCase{DType::kBF16, 4, 33, 256},
                                           MatmulCase{DType::kBF16, 7, 20, 19}, MatmulCase{DType::kBF16, 16, 65, 96},
                                           MatmulCase{DType::kBF16, 17, 70, 96}, MatmulCase{DType::kBF16, 64, 300, 77},
                                           MatmulCase{DType::kF16, 1, 30, 72}, MatmulCase{DType::kF16, 5, 30, 72},
                                           MatmulCase{DType::kF16, 40, 30, 72}, MatmulCase{DType::kF32, 1, 30, 72},
                                           MatmulCase{DType::kF32, 9, 30, 33}, MatmulCase{DType::kF32, 33, 30, 72}));

// The vector e^x of the attention weights: within a few float ulp of e^x (in double) from -87
// to 88, and e^0 exactly 1.
TEST(CpuSimd, Exp8IsWithinAFewUlpOfExp) {
  double worst = 0.0;
  for (float x0 = -87.0f; x0 + 0.0213f * 7 <= 88.0f; x0 += 0.173f) {
    alignas(32) float in[8], got[8];
    for (int i = 0; i < 8; ++i) in[i] = x0 + 0.0213f * static_cast<float>(i);
    _mm256_store_ps(got, cpu::exp8(_mm256_load_ps(in)));
    for (int i = 0; i < 8; ++i) {
      const double want = std::exp(static_cast<double>(in[i]));
      worst = std::max(worst, std::abs(got[i] - want) / want);
    }
  }
  EXPECT_LT(worst, 4.0 * 6e-8) << "largest relative error";
  alignas(32) float zeros[8] = {}, ones[8];
  _mm256_store_ps(ones, cpu::exp8(_mm256_load_ps(zeros)));
  for (float one : ones) EXPECT_EQ(one, 1.0f);
}

// Attention against a double-precision softmax written out plainly, for one shape and per-row key
// counts.
void expect_attention_matches_naive(int64_t q_heads, int64_t kv_heads, int64_t d, int64_t t,
                                    const std::vector<int32_t>& counts, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto m = static_cast<int64_t>(counts.size());
  std::vector<float> q = random_floats(m * q_heads * d, rng, 2.0f), k = random_floats(t * kv_heads * d, rng, 2.0f),
                     v = random_floats(t * kv_heads * d, rng);
  auto backend = make_cpu_backend();
  Tensor qt = tensor_from(q, {m, q_heads, d}), kt = tensor_from(k, {t, kv_heads, d}),
         vt = tensor_from(v, {t, kv_heads, d});
  Tensor ct = Tensor::zeros_cpu(DType::kI32, {m});
  std::copy(counts.begin(), counts.end(), ct.data<int32_t>());
  Tensor out = Tensor::zeros_cpu(DType::kF32, {m, q_heads, d});
  backend->attention(qt, kt, vt, ct, out);

  std::vector<double> want(static_cast<size_t>(m * q_heads * d), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t g = h / (q_heads / kv_heads);
      std::vector<double> s(static_cast<size_t>(counts[i]));
      double mx = -1e300, total = 0;
      for (int64_t j = 0; j < counts[i]; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q[(i * q_heads + h) * d + e] * k[(j * kv_heads + g) * d + e];
        s[j] = dot / std::sqrt(static_cast<double>(d));
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) total += (x = std::exp(x - mx));
      for (int64_t j = 0; j < counts[i]; ++j) {
        for (int64_t e = 0; e < d; ++e) want[(i * q_heads + h) * d + e] += s[j] / total * v[(j * kv_heads + g) * d + e];
      }
    }
  }
  EXPECT_LT(max_normalized_error(out.data<float>(), want), 1e-5)
      << q_heads << " heads over " << kv_heads << ", head dim " << d << ", " << t << " keys";
}

// Shapes for every path of the kernel: head dims that take 8 keys and 64 elements at a time
// and ones that do not, rows in tiles of 4 with a partial one, blocks of 64 keys and the rows
// that end inside one or just past one, no keys at all.
TEST(CpuBackend, AttentionMatchesNaiveSoftmaxWithPerRowKeyCounts) {
  expect_attention_matches_naive(4, 2, 12, 9, {1, 4, 9, 6, 9}, 7);  // causal-like, non-causal, context-only rows
  expect_attention_matches_naive(16, 8, 128, 300, {300, 0, 1, 63, 64, 65, 129, 200, 257, 299, 8}, 8);
  expect_attention_matches_naive(8, 2, 64, 130, {7, 8, 9, 15, 16, 17, 127, 128, 129}, 9);
  expect_attention_matches_naive(4, 1, 72, 70, {70, 69, 66}, 10);
  expect_attention_matches_naive(2, 2, 8, 65, {65}, 11);
  // Rows past one chunk of keys (512): each chunk's softmax apart, merged in order.
  expect_attention_matches_naive(16, 8, 128, 1300, {1300, 0, 511, 512, 513, 1024, 1025, 1}, 12);
  expect_attention_matches_naive(4, 1, 12, 1100, {1100, 513, 1000}, 13);
}

// A long row's keys go in chunks that may be split between threads (few rows) or taken by one
// task (many rows), and may be read through a block table: each row's result has the same bits
// whatever the call, the thread count or the layout.
TEST(CpuBackend, AttentionOverLongRowsGivesEachRowTheBitsOfItsOwnCount) {
  std::mt19937 rng(15);
  const int64_t q_heads = 4, kv_heads = 2, d = 64, t = 1200, rows = 70, block = 16;
  std::vector<int32_t> counts;
  for (int64_t i = 0; i < rows; ++i) counts.push_back(static_cast<int32_t>(t - 17 * i));
  counts[1] = 512;
  counts[2] = 513;
  counts[3] = 1024;
  const std::vector<float> q = random_floats(rows * q_heads * d, rng, 2.0f),
                           k = random_floats(t * kv_heads * d, rng, 2.0f), v = random_floats(t * kv_heads * d, rng);
  auto backend = make_cpu_backend();
  const Tensor kt = tensor_from(k, {t, kv_heads, d}), vt = tensor_from(v, {t, kv_heads, d});
  auto attend = [&](int64_t first, int64_t n, const Tensor& keys, const Tensor& values, const AttentionOptions& o) {
    Tensor ct = Tensor::zeros_cpu(DType::kI32, {n});
    std::copy(counts.begin() + first, counts.begin() + first + n, ct.data<int32_t>());
    Tensor out = Tensor::zeros_cpu(DType::kF32, {n, q_heads, d});
    const std::vector<float> qn(q.begin() + first * q_heads * d, q.begin() + (first + n) * q_heads * d);
    backend->attention(tensor_from(qn, {n, q_heads, d}), keys, values, ct, out, o);
    return std::vector<float>(out.data<float>(), out.data<float>() + out.numel());
  };
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> all_one_thread = attend(0, rows, kt, vt, {});
  omp_set_num_threads(std::max(threads, 2));
  const std::vector<float> all = attend(0, rows, kt, vt, {});
  // The same keys in shuffled blocks of a store twice as large.
  const int64_t blocks = t / block;
  std::vector<int32_t> order(static_cast<size_t>(2 * blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  Tensor table = Tensor::zeros_cpu(DType::kI32, {blocks});
  Tensor store_k = Tensor::zeros_cpu(DType::kF32, {2 * t, kv_heads, d}),
         store_v = Tensor::zeros_cpu(DType::kF32, {2 * t, kv_heads, d});
  for (int64_t b = 0; b < blocks; ++b) {
    table.data<int32_t>()[b] = order[static_cast<size_t>(b)];
    const int64_t floats = block * kv_heads * d, from = b * floats, to = order[static_cast<size_t>(b)] * floats;
    std::copy(k.begin() + from, k.begin() + from + floats, store_k.data<float>() + to);
    std::copy(v.begin() + from, v.begin() + from + floats, store_v.data<float>() + to);
  }
  AttentionOptions paged;
  paged.block_table = &table;
  paged.block_size = block;
  const std::vector<float> all_paged = attend(0, rows, store_k, store_v, paged);
  const size_t row_floats = static_cast<size_t>(q_heads * d);
  EXPECT_EQ(all, all_one_thread);
  EXPECT_EQ(all, all_paged);
  for (const int64_t m : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{40}}) {
    const std::vector<float> alone = attend(m, 1, kt, vt, {});
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + m * row_floats)) << "row " << m;
    const std::vector<float> in_block = attend(m, 5, kt, vt, {});  // a verification block's size
    EXPECT_TRUE(std::equal(in_block.begin(), in_block.begin() + row_floats, all.begin() + m * row_floats))
        << "row " << m;
  }
  // A window over a ring (chunks from the window's first position) with a sink per head.
  Tensor sinks = tensor_from(random_floats(q_heads, rng), {q_heads});
  AttentionOptions windowed;
  windowed.sinks = &sinks;
  windowed.sliding_window = 700;
  const std::vector<float> all_windowed = attend(0, rows, kt, vt, windowed);
  for (const int64_t m : {int64_t{0}, int64_t{3}, int64_t{40}}) {
    const std::vector<float> alone = attend(m, 1, kt, vt, windowed);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all_windowed.begin() + m * row_floats)) << "row " << m;
  }
  omp_set_num_threads(threads);
}

// The heads of one KV head go two by two, sharing each key and value load: the same bits as each
// head alone (MHA over a copy of the keys takes them one by one).
TEST(CpuBackend, AttentionHeadsInPairsGiveTheBitsOfHeadsAlone) {
  std::mt19937 rng(12);
  const int64_t m = 6, d = 128, t = 150;
  const std::vector<int32_t> counts = {150, 1, 64, 77, 129, 8};
  std::vector<float> q = random_floats(m * 2 * d, rng, 2.0f), k = random_floats(t * d, rng, 2.0f),
                     v = random_floats(t * d, rng);
  auto backend = make_cpu_backend();
  Tensor ct = Tensor::zeros_cpu(DType::kI32, {m});
  std::copy(counts.begin(), counts.end(), ct.data<int32_t>());
  Tensor kt = tensor_from(k, {t, 1, d}), vt = tensor_from(v, {t, 1, d});
  Tensor paired = Tensor::zeros_cpu(DType::kF32, {m, 2, d});
  backend->attention(tensor_from(q, {m, 2, d}), kt, vt, ct, paired);
  for (int64_t h = 0; h < 2; ++h) {
    std::vector<float> q_head;
    for (int64_t i = 0; i < m; ++i) {
      q_head.insert(q_head.end(), q.begin() + (i * 2 + h) * d, q.begin() + (i * 2 + h + 1) * d);
    }
    Tensor alone = Tensor::zeros_cpu(DType::kF32, {m, 1, d});
    backend->attention(tensor_from(q_head, {m, 1, d}), kt, vt, ct, alone);
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(0, std::memcmp(alone.data<float>() + i * d, paired.data<float>() + (i * 2 + h) * d, sizeof(float) * d))
          << "row " << i << " head " << h;
    }
  }
}

// A bf16 cache (keys and values as bf16 bits, widened as loaded) gives the bits of the float32
// kernel over the same rounded values where the head dim is a multiple of 8 (every vector path);
// a head dim that is not (scalar tails, compiled apart for each type) within a rounding step.
TEST(CpuBackend, AttentionOverABf16CacheGivesTheBitsOfTheRoundedValues) {
  std::mt19937 rng(13);
  auto backend = make_cpu_backend();
  for (const int64_t d : {int64_t{128}, int64_t{72}, int64_t{12}}) {
    const int64_t m = 5, t = 140;
    const std::vector<int32_t> counts = {140, 0, 1, 65, 129};
    std::vector<float> q = random_floats(m * 4 * d, rng, 2.0f), k = random_floats(t * 2 * d, rng, 2.0f),
                       v = random_floats(t * 2 * d, rng);
    Tensor k16 = Tensor::zeros_cpu(DType::kBF16, {t, 2, d}), v16 = Tensor::zeros_cpu(DType::kBF16, {t, 2, d});
    for (size_t i = 0; i < k.size(); ++i) {
      k16.data<uint16_t>()[i] = f32_to_bf16(k[i]);
      v16.data<uint16_t>()[i] = f32_to_bf16(v[i]);
      k[i] = bf16_to_f32(k16.data<uint16_t>()[i]);
      v[i] = bf16_to_f32(v16.data<uint16_t>()[i]);
    }
    Tensor ct = Tensor::zeros_cpu(DType::kI32, {m});
    std::copy(counts.begin(), counts.end(), ct.data<int32_t>());
    const Tensor qt = tensor_from(q, {m, 4, d});
    Tensor from_bf16 = Tensor::zeros_cpu(DType::kF32, {m, 4, d}), from_f32 = Tensor::zeros_cpu(DType::kF32, {m, 4, d});
    backend->attention(qt, k16, v16, ct, from_bf16);
    backend->attention(qt, tensor_from(k, {t, 2, d}), tensor_from(v, {t, 2, d}), ct, from_f32);
    if (d % 8 == 0) {
      EXPECT_EQ(0, std::memcmp(from_bf16.raw(), from_f32.raw(), from_f32.nbytes())) << "head dim " << d;
    } else {
      for (int64_t i = 0; i < from_f32.numel(); ++i) {
        EXPECT_NEAR(from_bf16.data<float>()[i], from_f32.data<float>()[i], 1e-6) << "head dim " << d << " at " << i;
      }
    }
  }
  // k and v of different dtypes are refused.
  Tensor k16 = Tensor::zeros_cpu(DType::kBF16, {4, 1, 8}), v32 = Tensor::zeros_cpu(DType::kF32, {4, 1, 8});
  Tensor ct = Tensor::zeros_cpu(DType::kI32, {1}), out = Tensor::zeros_cpu(DType::kF32, {1, 1, 8});
  EXPECT_THROW(backend->attention(Tensor::zeros_cpu(DType::kF32, {1, 1, 8}), k16, v32, ct, out), Error);
}

// The batched op's default: each chunk's rows stored where store_at says, then attention against
// its own cache, exactly as the primitives one chunk at a time; chunks that do not cover q's rows
// in order, and rows stored outside a cache, are refused.
TEST(CpuBackend, StoreAndAttendIsThePrimitivesChunkByChunk) {
  std::mt19937 rng(9);
  const int64_t q_heads = 4, kv_heads = 2, d = 8, rows = 5;
  auto backend = make_cpu_backend();
  Tensor q = tensor_from(random_floats(rows * q_heads * d, rng), {rows, q_heads, d});
  Tensor k = tensor_from(random_floats(rows * kv_heads * d, rng), {rows, kv_heads, d});
  Tensor v = tensor_from(random_floats(rows * kv_heads * d, rng), {rows, kv_heads, d});
  Tensor counts = Tensor::zeros_cpu(DType::kI32, {rows});
  const int32_t count_values[] = {4, 5, 3, 3, 3};  // chunk 0: 2 rows from 3 (causal); chunk 1: 3 rows from 0, all
  std::copy(std::begin(count_values), std::end(count_values), counts.data<int32_t>());
  std::vector<Tensor> caches, expected;
  for (int i = 0; i < 4; ++i) {
    caches.push_back(tensor_from(random_floats(6 * kv_heads * d, rng), {6, kv_heads, d}));
    expected.push_back(
        tensor_from({caches.back().data<float>(), caches.back().data<float>() + 6 * kv_heads * d}, {6, kv_heads, d}));
  }
  const CacheChunk chunks[] = {{&caches[0], &caches[1], 0, 2}, {&caches[2], &caches[3], 2, 3}};
  Tensor store_at = Tensor::zeros_cpu(DType::kI32, {rows});
  const int32_t store_values[] = {3, 4, 0, 1, 2};
  std::copy(std::begin(store_values), std::end(store_values), store_at.data<int32_t>());
  Tensor out = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, d});
  backend->store_and_attend(q, k, v, chunks, store_at, counts, out);

  Tensor want = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, d});
  const int64_t firsts[] = {0, 2}, sizes[] = {2, 3}, starts[] = {3, 0};
  for (int c = 0; c < 2; ++c) {
    backend->copy_rows(k.slice_rows(firsts[c], sizes[c]), expected[2 * c], starts[c]);
    backend->copy_rows(v.slice_rows(firsts[c], sizes[c]), expected[2 * c + 1], starts[c]);
    Tensor chunk_want = want.slice_rows(firsts[c], sizes[c]);
    backend->attention(q.slice_rows(firsts[c], sizes[c]), expected[2 * c], expected[2 * c + 1],
                       counts.slice_rows(firsts[c], sizes[c]), chunk_want);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(0, std::memcmp(caches[i].raw(), expected[i].raw(), caches[i].nbytes())) << "cache " << i;
  }
  EXPECT_EQ(0, std::memcmp(out.raw(), want.raw(), out.nbytes()));

  const CacheChunk skipping_a_row[] = {{&caches[0], &caches[1], 1, 4}};
  EXPECT_THROW(backend->store_and_attend(q, k, v, skipping_a_row, store_at, counts, out), Error);
  const CacheChunk short_of_rows[] = {{&caches[0], &caches[1], 0, 4}};
  EXPECT_THROW(backend->store_and_attend(q, k, v, short_of_rows, store_at, counts, out), Error);
  store_at.data<int32_t>()[4] = 6;  // one past the cache
  EXPECT_THROW(backend->store_and_attend(q, k, v, chunks, store_at, counts, out), Error);
}

// The fused products' defaults (the CPU backend's; a GPU backend's fast paths are held to the
// same results by backend_ops_test).
TEST(CpuBackend, MatmulManyAndMatmulSwigluGiveTheUnfusedOpsResults) {
  std::mt19937 rng(10);
  const int64_t m = 3, n = 24, k = 40;
  auto backend = make_cpu_backend();
  Tensor x = tensor_from(random_floats(m * k, rng), {m, k});
  std::vector<float> a = random_floats(n * k, rng), b = random_floats(n * k, rng);
  Tensor wa = weight_from(a, DType::kBF16, {n, k}), wb = weight_from(b, DType::kBF16, {n, k});

  Tensor ya = Tensor::zeros_cpu(DType::kF32, {m, n}), yb = Tensor::zeros_cpu(DType::kF32, {m, n});
  const WeightProduct products[] = {{&wa, &ya}, {&wb, &yb}};
  backend->matmul_many(x, products);
  Tensor want_a = Tensor::zeros_cpu(DType::kF32, {m, n}), want_b = Tensor::zeros_cpu(DType::kF32, {m, n});
  backend->matmul(x, wa, want_a);
  backend->matmul(x, wb, want_b);
  EXPECT_EQ(0, std::memcmp(ya.raw(), want_a.raw(), ya.nbytes()));
  EXPECT_EQ(0, std::memcmp(yb.raw(), want_b.raw(), yb.nbytes()));

  Tensor out = Tensor::zeros_cpu(DType::kF32, {m, n}), scratch = Tensor::zeros_cpu(DType::kF32, {m, n});
  backend->matmul_swiglu(x, wa, wb, out, scratch);
  backend->swiglu(want_a, want_b, want_a);
  EXPECT_EQ(0, std::memcmp(out.raw(), want_a.raw(), out.nbytes()));

  const WeightProduct no_output[] = {{&wa, &ya}, {&wb, nullptr}};
  EXPECT_THROW(backend->matmul_many(x, no_output), Error);
}

// With the q/k norm and RoPE, the default is head_norm_rope of q and k, then the same call
// without: the same bits, q and k changed in place.
TEST(CpuBackend, StoreAndAttendWithNormRopeIsHeadNormRopeFirst) {
  std::mt19937 rng(11);
  const int64_t q_heads = 4, kv_heads = 2, d = 8, rows = 3;
  auto backend = make_cpu_backend();
  const std::vector<float> q_values = random_floats(rows * q_heads * d, rng);
  const std::vector<float> k_values = random_floats(rows * kv_heads * d, rng);
  Tensor v = tensor_from(random_floats(rows * kv_heads * d, rng), {rows, kv_heads, d});
  Tensor q_norm = tensor_from(random_floats(d, rng), {d}), k_norm = tensor_from(random_floats(d, rng), {d});
  Tensor positions = Tensor::zeros_cpu(DType::kI32, {rows}), counts = Tensor::zeros_cpu(DType::kI32, {rows});
  for (int64_t i = 0; i < rows; ++i) {
    positions.data<int32_t>()[i] = static_cast<int32_t>(100 + i);
    counts.data<int32_t>()[i] = static_cast<int32_t>(i + 1);
  }
  auto run = [&](bool fused) {
    Tensor q = tensor_from(q_values, {rows, q_heads, d}), k = tensor_from(k_values, {rows, kv_heads, d});
    Tensor keys = Tensor::zeros_cpu(DType::kF32, {rows, kv_heads, d});
    Tensor values = Tensor::zeros_cpu(DType::kF32, {rows, kv_heads, d});
    Tensor out = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, d});
    const CacheChunk chunk[] = {{&keys, &values, 0, rows}};
    Tensor store_at = Tensor::zeros_cpu(DType::kI32, {rows});
    for (int64_t i = 0; i < rows; ++i) store_at.data<int32_t>()[i] = static_cast<int32_t>(i);
    if (fused) {
      const QkNormRope norm_rope{&q_norm, &k_norm, &positions, 1e-6f, {1e6f}};
      backend->store_and_attend(q, k, v, chunk, store_at, counts, out, &norm_rope);
    } else {
      backend->head_norm_rope(q, q_norm, 1e-6f, positions, 1e6f);
      backend->head_norm_rope(k, k_norm, 1e-6f, positions, 1e6f);
      backend->store_and_attend(q, k, v, chunk, store_at, counts, out);
    }
    return std::vector<Tensor>{q, k, keys, out};
  };
  const std::vector<Tensor> fused = run(true), apart = run(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(fused[i].raw(), apart[i].raw(), fused[i].nbytes())) << "tensor " << i;
  }
  EXPECT_NE(0, std::memcmp(fused[0].raw(), q_values.data(), fused[0].nbytes())) << "q was not changed in place";

  Tensor q = tensor_from(q_values, {rows, q_heads, d}), k = tensor_from(k_values, {rows, kv_heads, d});
  Tensor out = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, d});
  const CacheChunk chunk[] = {{&k, &v, 0, rows}};
  const QkNormRope no_positions{&q_norm, &k_norm, nullptr, 1e-6f, {1e6f}};
  EXPECT_THROW(backend->store_and_attend(q, k, v, chunk, counts, counts, out, &no_positions), Error);
}

// store_kv is the KV half of store_and_attend: k normed and rotated in place when asked, then
// every chunk's rows into its cache at store_at; chunks that miss a row are refused up front.
TEST(CpuBackend, StoreKvIsHeadNormRopeThenStoreRows) {
  std::mt19937 rng(12);
  const int64_t kv_heads = 2, d = 8, rows = 5;
  auto backend = make_cpu_backend();
  const std::vector<float> k_values = random_floats(rows * kv_heads * d, rng);
  Tensor v = tensor_from(random_floats(rows * kv_heads * d, rng), {rows, kv_heads, d});
  Tensor k_norm = tensor_from(random_floats(d, rng), {d});
  Tensor positions = Tensor::zeros_cpu(DType::kI32, {rows}), store_at = Tensor::zeros_cpu(DType::kI32, {rows});
  const int32_t at[] = {3, 4, 0, 1, 2};  // chunk 0: 2 rows after 3 cached; chunk 1: 3 rows from 0
  for (int64_t i = 0; i < rows; ++i) {
    positions.data<int32_t>()[i] = static_cast<int32_t>(50 + i);
    store_at.data<int32_t>()[i] = at[i];
  }
  auto run = [&](bool fused) {
    std::vector<Tensor> out = {tensor_from(k_values, {rows, kv_heads, d})};
    for (int i = 0; i < 4; ++i) out.push_back(Tensor::zeros_cpu(DType::kF32, {6, kv_heads, d}));
    const CacheChunk chunks[] = {{&out[1], &out[2], 0, 2}, {&out[3], &out[4], 2, 3}};
    if (fused) {
      const QkNormRope norm_rope{.k_norm = &k_norm, .positions = &positions, .eps = 1e-6f, .rope = {1e6f}};
      backend->store_kv(out[0], v, chunks, store_at, &norm_rope);
    } else {
      backend->head_norm_rope(out[0], k_norm, 1e-6f, positions, 1e6f);
      for (int c = 0; c < 2; ++c) {
        const CacheChunk& chunk = chunks[c];
        backend->store_rows(out[0].slice_rows(chunk.first_row, chunk.rows), *chunk.keys,
                            store_at.slice_rows(chunk.first_row, chunk.rows));
        backend->store_rows(v.slice_rows(chunk.first_row, chunk.rows), *chunk.values,
                            store_at.slice_rows(chunk.first_row, chunk.rows));
      }
    }
    return out;
  };
  const std::vector<Tensor> fused = run(true), apart = run(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(fused[i].raw(), apart[i].raw(), fused[i].nbytes())) << "tensor " << i;
  }
  EXPECT_NE(0, std::memcmp(fused[1].raw(), Tensor::zeros_cpu(DType::kF32, {6, kv_heads, d}).raw(), fused[1].nbytes()));

  Tensor k = tensor_from(k_values, {rows, kv_heads, d});
  Tensor cache = Tensor::zeros_cpu(DType::kF32, {6, kv_heads, d});
  const CacheChunk short_of_rows[] = {{&cache, &cache, 0, 4}};
  EXPECT_THROW(backend->store_kv(k, v, short_of_rows, store_at), Error);
  const CacheChunk whole[] = {{&cache, &cache, 0, rows}};
  const QkNormRope no_norm{.positions = &positions};
  EXPECT_THROW(backend->store_kv(k, v, whole, store_at, &no_norm), Error);
}

// Without the q/k norm (a family that has none), store_and_attend and store_kv rotate q and k
// with rope alone: the same bits as rope of q and k, then the calls without; one norm alone is
// refused.
TEST(CpuBackend, StoreAndAttendWithoutNormIsRopeFirst) {
  std::mt19937 rng(13);
  const int64_t q_heads = 4, kv_heads = 2, d = 8, rows = 3;
  auto backend = make_cpu_backend();
  const std::vector<float> q_values = random_floats(rows * q_heads * d, rng);
  const std::vector<float> k_values = random_floats(rows * kv_heads * d, rng);
  Tensor v = tensor_from(random_floats(rows * kv_heads * d, rng), {rows, kv_heads, d});
  Tensor positions = Tensor::zeros_cpu(DType::kI32, {rows}), counts = Tensor::zeros_cpu(DType::kI32, {rows});
  Tensor store_at = Tensor::zeros_cpu(DType::kI32, {rows});
  for (int64_t i = 0; i < rows; ++i) {
    positions.data<int32_t>()[i] = static_cast<int32_t>(70 + i);
    counts.data<int32_t>()[i] = static_cast<int32_t>(i + 1);
    store_at.data<int32_t>()[i] = static_cast<int32_t>(i);
  }
  const QkNormRope rope_only{.positions = &positions, .rope = {.theta = 1e4f}};
  auto run = [&](bool fused) {
    Tensor q = tensor_from(q_values, {rows, q_heads, d}), k = tensor_from(k_values, {rows, kv_heads, d});
    Tensor keys = Tensor::zeros_cpu(DType::kF32, {rows, kv_heads, d});
    Tensor values = Tensor::zeros_cpu(DType::kF32, {rows, kv_heads, d});
    Tensor out = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, d});
    Tensor k_only = tensor_from(k_values, {rows, kv_heads, d});
    Tensor context_keys = Tensor::zeros_cpu(DType::kF32, {rows, kv_heads, d});
    Tensor context_values = Tensor::zeros_cpu(DType::kF32, {rows, kv_heads, d});
    const CacheChunk chunk[] = {{&keys, &values, 0, rows}};
    const CacheChunk context[] = {{&context_keys, &context_values, 0, rows}};
    if (fused) {
      backend->store_and_attend(q, k, v, chunk, store_at, counts, out, &rope_only);
      backend->store_kv(k_only, v, context, store_at, &rope_only);
    } else {
      backend->rope(q, positions, 1e4f);
      backend->rope(k, positions, 1e4f);
      backend->store_and_attend(q, k, v, chunk, store_at, counts, out);
      backend->rope(k_only, positions, 1e4f);
      backend->store_kv(k_only, v, context, store_at);
    }
    return std::vector<Tensor>{q, k, keys, out, k_only, context_keys};
  };
  const std::vector<Tensor> fused = run(true), apart = run(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(fused[i].raw(), apart[i].raw(), fused[i].nbytes())) << "tensor " << i;
  }
  EXPECT_NE(0, std::memcmp(fused[0].raw(), q_values.data(), fused[0].nbytes())) << "q was not rotated in place";

  Tensor q = tensor_from(q_values, {rows, q_heads, d}), k = tensor_from(k_values, {rows, kv_heads, d});
  Tensor out = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, d});
  Tensor norm = tensor_from(random_floats(d, rng), {d});
  const CacheChunk chunk[] = {{&k, &v, 0, rows}};
  const QkNormRope k_norm_alone{.k_norm = &norm, .positions = &positions, .eps = 1e-6f, .rope = {.theta = 1e4f}};
  EXPECT_THROW(backend->store_and_attend(q, k, v, chunk, store_at, counts, out, &k_norm_alone), Error);
  const QkNormRope no_theta{.positions = &positions};
  EXPECT_THROW(backend->store_and_attend(q, k, v, chunk, store_at, counts, out, &no_theta), Error);
}

TEST(CpuBackend, GatherRowsPicksRowsInAnyOrderAndRefusesRowsOutsideTheSource) {
  auto backend = make_cpu_backend();
  std::vector<float> values(4 * 3);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Tensor src = tensor_from(values, {4, 3});
  Tensor rows = Tensor::zeros_cpu(DType::kI32, {3});
  const int32_t picked[] = {3, 0, 3};
  std::copy(std::begin(picked), std::end(picked), rows.data<int32_t>());
  Tensor dst = Tensor::zeros_cpu(DType::kF32, {3, 3});
  backend->gather_rows(src, rows, dst);
  EXPECT_EQ(std::vector<float>(dst.data<float>(), dst.data<float>() + 9),
            (std::vector<float>{9, 10, 11, 0, 1, 2, 9, 10, 11}));
  rows.data<int32_t>()[1] = 4;
  EXPECT_THROW(backend->gather_rows(src, rows, dst), Error);
  Tensor wrong_width = Tensor::zeros_cpu(DType::kF32, {3, 2});
  rows.data<int32_t>()[1] = 0;
  EXPECT_THROW(backend->gather_rows(src, rows, wrong_width), Error);
}

TEST(CpuBackend, RopeRotatesHalvesAndKeepsNorms) {
  std::mt19937 rng(3);
  const int64_t heads = 2, d = 8;
  std::vector<float> x = random_floats(heads * d, rng);
  Tensor xt = tensor_from(x, {1, heads, d});
  Tensor pos = Tensor::zeros_cpu(DType::kI32, {1});
  pos.data<int32_t>()[0] = 5;
  auto backend = make_cpu_backend();
  backend->rope(xt, pos, 10000.0f);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = 5.0 * std::pow(10000.0, -2.0 * i / d);
      const double a = x[h * d + i], b = x[h * d + i + d / 2];
      EXPECT_NEAR(xt.data<float>()[h * d + i], a * std::cos(angle) - b * std::sin(angle), 1e-5);
      EXPECT_NEAR(xt.data<float>()[h * d + i + d / 2], b * std::cos(angle) + a * std::sin(angle), 1e-5);
    }
  }
}

TEST(CpuBackend, AddRmsnormAddsThenNormalizes) {
  std::mt19937 rng(5);
  const int64_t rows = 3, dim = 40;
  std::vector<float> h = random_floats(rows * dim, rng), delta = random_floats(rows * dim, rng),
                     w = random_floats(dim, rng);
  Tensor ht = tensor_from(h, {rows, dim}), dt = tensor_from(delta, {rows, dim}), wt = tensor_from(w, {dim});
  Tensor y = Tensor::zeros_cpu(DType::kF32, {rows, dim});
  auto backend = make_cpu_backend();
  backend->add_rmsnorm(ht, dt, wt, 1e-6f, y);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += std::pow(double(h[r * dim + i]) + delta[r * dim + i], 2);
    const double scale = 1.0 / std::sqrt(ss / dim + 1e-6);
    for (int64_t i = 0; i < dim; ++i) {
      const double sum = double(h[r * dim + i]) + delta[r * dim + i];
      EXPECT_NEAR(ht.data<float>()[r * dim + i], sum, 1e-6);
      EXPECT_NEAR(y.data<float>()[r * dim + i], sum * scale * w[i], 1e-5);
    }
  }
}

TEST(CpuBackend, EmbeddingRejectsIdsOutsideTheTable) {
  auto backend = make_cpu_backend();
  Tensor table = Tensor::zeros_cpu(DType::kBF16, {10, 4});
  Tensor ids = Tensor::zeros_cpu(DType::kI32, {1});
  ids.data<int32_t>()[0] = 10;
  Tensor out = Tensor::zeros_cpu(DType::kF32, {1, 4});
  EXPECT_THROW(backend->embedding(table, ids, out), Error);
}

}  // namespace
}  // namespace flashq
