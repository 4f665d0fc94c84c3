// Every op of the CUDA backend against the CPU backend (the reference) on random inputs, as
// llama.cpp's backend-ops test does: decode (M = 1), blocks (M = 16), odd sizes that miss every
// vector width, GQA ratios, key counts that differ per row. Outputs are filled with NaN before
// each op so an element the kernel never writes fails the comparison. Tolerance, relative to the
// largest reference value: 1e-4 with f32 weights, 1e-2 with bf16/f16 weights.
//
// Without a CUDA device every test skips (GTEST_SKIP) saying so.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "tests/kernels/cuda_parity_fixture.h"

namespace flashq {
namespace {

// ---- matmul ----

struct MatmulCase {
  DType dtype;
  int64_t m, n, k;
};

// Readable case names in test listings (and ctest names) instead of the struct's raw bytes.
void PrintTo(const MatmulCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << " m=" << c.m << " n=" << c.n << " k=" << c.k;
}

class CudaMatmulParity : public CudaParity, public ::testing::WithParamInterface<MatmulCase> {};

TEST_P(CudaMatmulParity, MatchesCpuBackend) {
  const MatmulCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 7 + c.k));
  std::vector<float> x = random_floats(static_cast<size_t>(c.m * c.k), rng);
  std::vector<float> w = random_floats(static_cast<size_t>(c.n * c.k), rng, 0.5f);
  Tensor x_host = host_tensor(x, DType::kF32, {c.m, c.k});
  Tensor w_host = host_tensor(w, c.dtype, {c.n, c.k});
  Tensor y_host = Tensor::zeros_cpu(DType::kF32, {c.m, c.n});
  cpu_->matmul(x_host, w_host, y_host);

  Tensor w_gpu = gpu_->upload_weight(w_host);
  ASSERT_EQ(w_gpu.device(), Device::kCuda);
  ASSERT_EQ(w_gpu.dtype(), c.dtype);
  Tensor y_gpu = poisoned({c.m, c.n});
  gpu_->matmul(to_gpu(x_host), w_gpu, y_gpu);
  EXPECT_LT(normalized_error(download(y_gpu), host_values(y_host)), tolerance_for(c.dtype))
      << dtype_name(c.dtype) << " m=" << c.m << " n=" << c.n << " k=" << c.k;
}

std::vector<MatmulCase> matmul_cases() {
  std::vector<MatmulCase> cases;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t m : {1, 2, 7, 8, 9, 16, 17, 64, 128, 129, 259}) {
      cases.push_back({dtype, m, 96, 256});   // vector path, whole tiles
      cases.push_back({dtype, m, 33, 100});   // k not a multiple of 8: scalar path; n not of 8 warps
    }
    cases.push_back({dtype, 1, 1000, 1024});
    cases.push_back({dtype, 16, 3072, 1024});
    cases.push_back({dtype, 300, 512, 1024});  // prefill: cuBLAS (bf16, f32)
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaMatmulParity, ::testing::ValuesIn(matmul_cases()),
                         [](const ::testing::TestParamInfo<MatmulCase>& p) {
                           return std::string(dtype_name(p.param.dtype)) + "_m" + std::to_string(p.param.m) + "_n" +
                                  std::to_string(p.param.n) + "_k" + std::to_string(p.param.k);
                         });

// Decode (one row) and verification (blocks of up to 8 sequences, 128 rows) must give a row
// bit-identical logits, or greedy speculative decoding would not reproduce target-only decoding
// exactly.
TEST_F(CudaParity, MatmulRowDoesNotDependOnTheOtherRowsUpTo128Rows) {
  std::mt19937 rng(5);
  const int64_t m = 128, n = 200, k = 512;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<float> x = random_floats(static_cast<size_t>(m * k), rng);
    std::vector<float> w = random_floats(static_cast<size_t>(n * k), rng, 0.5f);
    Tensor x_gpu = to_gpu(host_tensor(x, DType::kF32, {m, k}));
    Tensor w_gpu = gpu_->upload_weight(host_tensor(w, dtype, {n, k}));
    Tensor block = poisoned({m, n});
    gpu_->matmul(x_gpu, w_gpu, block);
    const std::vector<float> block_values = download(block);
    for (int64_t row : {0, 5, 15, 64, 127}) {
      Tensor single = poisoned({1, n});
      gpu_->matmul(x_gpu.slice_rows(row, 1), w_gpu, single);
      const std::vector<float> single_values = download(single);
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(single_values[j], block_values[row * n + j]) << dtype_name(dtype) << " row " << row << " col " << j;
      }
    }
  }
}

// ---- norms ----

struct NormCase {
  DType w_dtype;
  int64_t rows, dim;
};

void PrintTo(const NormCase& c, std::ostream* os) {
  *os << dtype_name(c.w_dtype) << " rows=" << c.rows << " dim=" << c.dim;
}

class CudaNormParity : public CudaParity, public ::testing::WithParamInterface<NormCase> {};

TEST_P(CudaNormParity, RmsnormMatchesCpuBackend) {
  const NormCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.rows * 17 + c.dim));
  std::vector<float> x = random_floats(static_cast<size_t>(c.rows * c.dim), rng, 3.0f);
  std::vector<float> w = random_floats(static_cast<size_t>(c.dim), rng, 2.0f);
  Tensor x_host = host_tensor(x, DType::kF32, {c.rows, c.dim});
  Tensor w_host = host_tensor(w, c.w_dtype, {c.dim});
  Tensor y_host = Tensor::zeros_cpu(DType::kF32, {c.rows, c.dim});
  cpu_->rmsnorm(x_host, w_host, 1e-6f, y_host);

  Tensor w_gpu = gpu_->upload_weight(w_host);
  Tensor y_gpu = poisoned({c.rows, c.dim});
  gpu_->rmsnorm(to_gpu(x_host), w_gpu, 1e-6f, y_gpu);
  EXPECT_LT(normalized_error(download(y_gpu), host_values(y_host)), 1e-4) << "rows=" << c.rows << " dim=" << c.dim;

  // In place, as the per-head q_norm and k_norm run.
  Tensor in_place = to_gpu(x_host);
  gpu_->rmsnorm(in_place, w_gpu, 1e-6f, in_place);
  EXPECT_LT(normalized_error(download(in_place), host_values(y_host)), 1e-4) << "in place";
}

TEST_P(CudaNormParity, AddRmsnormMatchesCpuBackend) {
  const NormCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.rows * 19 + c.dim));
  std::vector<float> h = random_floats(static_cast<size_t>(c.rows * c.dim), rng, 3.0f);
  std::vector<float> delta = random_floats(static_cast<size_t>(c.rows * c.dim), rng);
  std::vector<float> w = random_floats(static_cast<size_t>(c.dim), rng, 2.0f);
  Tensor h_host = host_tensor(h, DType::kF32, {c.rows, c.dim});
  Tensor delta_host = host_tensor(delta, DType::kF32, {c.rows, c.dim});
  Tensor w_host = host_tensor(w, c.w_dtype, {c.dim});
  Tensor h_gpu = to_gpu(h_host);
  Tensor y_host = Tensor::zeros_cpu(DType::kF32, {c.rows, c.dim});
  cpu_->add_rmsnorm(h_host, delta_host, w_host, 1e-6f, y_host);

  Tensor y_gpu = poisoned({c.rows, c.dim});
  gpu_->add_rmsnorm(h_gpu, to_gpu(delta_host), gpu_->upload_weight(w_host), 1e-6f, y_gpu);
  EXPECT_LT(normalized_error(download(h_gpu), host_values(h_host)), 1e-6) << "residual h + delta";
  EXPECT_LT(normalized_error(download(y_gpu), host_values(y_host)), 1e-4) << "normalized";
}

std::vector<NormCase> norm_cases() {
  std::vector<NormCase> cases;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t rows : {1, 16, 33}) {
      for (int64_t dim : {16, 128, 1000, 4096}) cases.push_back({dtype, rows, dim});
    }
  }
  cases.push_back({DType::kBF16, 512, 7});  // shorter than a warp
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaNormParity, ::testing::ValuesIn(norm_cases()),
                         [](const ::testing::TestParamInfo<NormCase>& p) {
                           return std::string(dtype_name(p.param.w_dtype)) + "_rows" + std::to_string(p.param.rows) +
                                  "_dim" + std::to_string(p.param.dim);
                         });

// ---- element-wise ----

TEST_F(CudaParity, AddMatchesCpuBackend) {
  std::mt19937 rng(7);
  for (int64_t count : {1, 1000, 70001}) {
    std::vector<float> h = random_floats(static_cast<size_t>(count), rng);
    std::vector<float> d = random_floats(static_cast<size_t>(count), rng);
    Tensor h_host = host_tensor(h, DType::kF32, {count});
    Tensor d_host = host_tensor(d, DType::kF32, {count});
    Tensor h_gpu = to_gpu(h_host);
    cpu_->add(h_host, d_host);
    gpu_->add(h_gpu, to_gpu(d_host));
    EXPECT_LT(normalized_error(download(h_gpu), host_values(h_host)), 1e-6) << "count " << count;
  }
}

TEST_F(CudaParity, SwigluMatchesCpuBackendAlsoInPlace) {
  std::mt19937 rng(8);
  for (int64_t count : {1, 3072, 70001}) {
    std::vector<float> g = random_floats(static_cast<size_t>(count), rng, 6.0f);
    std::vector<float> u = random_floats(static_cast<size_t>(count), rng, 2.0f);
    Tensor g_host = host_tensor(g, DType::kF32, {count});
    Tensor u_host = host_tensor(u, DType::kF32, {count});
    Tensor out_host = Tensor::zeros_cpu(DType::kF32, {count});
    cpu_->swiglu(g_host, u_host, out_host);
    Tensor out_gpu = poisoned({count});
    gpu_->swiglu(to_gpu(g_host), to_gpu(u_host), out_gpu);
    EXPECT_LT(normalized_error(download(out_gpu), host_values(out_host)), 1e-5) << "count " << count;
    Tensor gate_gpu = to_gpu(g_host);  // the MLP writes into its gate buffer
    gpu_->swiglu(gate_gpu, to_gpu(u_host), gate_gpu);
    EXPECT_LT(normalized_error(download(gate_gpu), host_values(out_host)), 1e-5) << "in place, count " << count;
  }
}

// ---- rope ----

struct RopeCase {
  int64_t rows, heads, head_dim;
};

void PrintTo(const RopeCase& c, std::ostream* os) {
  *os << "rows=" << c.rows << " heads=" << c.heads << " head_dim=" << c.head_dim;
}

class CudaRopeParity : public CudaParity, public ::testing::WithParamInterface<RopeCase> {};

TEST_P(CudaRopeParity, MatchesCpuBackend) {
  const RopeCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.rows * 3 + c.heads * 5 + c.head_dim));
  std::vector<float> x = random_floats(static_cast<size_t>(c.rows * c.heads * c.head_dim), rng);
  std::vector<int32_t> positions(static_cast<size_t>(c.rows));
  std::uniform_int_distribution<int32_t> position(0, 40000);
  for (int32_t& p : positions) p = position(rng);
  positions[0] = 0;
  Tensor x_host = host_tensor(x, DType::kF32, {c.rows, c.heads, c.head_dim});
  Tensor x_gpu = to_gpu(x_host);
  Tensor positions_host = host_ints(positions);
  cpu_->rope(x_host, positions_host, 1e6f);
  gpu_->rope(x_gpu, to_gpu(positions_host), 1e6f);
  EXPECT_LT(normalized_error(download(x_gpu), host_values(x_host)), 1e-4)
      << "rows=" << c.rows << " heads=" << c.heads << " head_dim=" << c.head_dim;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaRopeParity,
                         ::testing::Values(RopeCase{1, 32, 128}, RopeCase{16, 8, 128}, RopeCase{7, 4, 16},
                                           RopeCase{33, 3, 10}, RopeCase{300, 2, 64}),
                         [](const ::testing::TestParamInfo<RopeCase>& p) {
                           return "rows" + std::to_string(p.param.rows) + "_heads" + std::to_string(p.param.heads) +
                                  "_dim" + std::to_string(p.param.head_dim);
                         });

// ---- attention ----

struct AttentionCase {
  const char* name;
  int64_t rows, q_heads, kv_heads, head_dim, keys;
  bool same_count;  // every row sees all keys (a draft block); else per-row counts in [0, keys]
  // q 4 bytes off 16-byte alignment: the float4 tile kernels refuse it, the one-row kernel takes it
  bool shift_q = false;
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

class CudaAttentionParity : public CudaParity, public ::testing::WithParamInterface<AttentionCase> {};

// Where a failing case first differs: row, head and element, with the row's key count, which
// tells a tile, slice or mask fault from a wrong sum.
std::string first_attention_mismatch(const std::vector<float>& got, const std::vector<float>& want,
                                     const std::vector<int32_t>& counts, int64_t q_heads, int64_t head_dim) {
  double scale = 1e-30;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isfinite(got[i]) && std::abs(static_cast<double>(got[i]) - want[i]) <= 1e-4 * scale) continue;
    const auto row = static_cast<int64_t>(i) / (q_heads * head_dim);
    return "first at row " + std::to_string(row) + " (" + std::to_string(counts[static_cast<size_t>(row)]) +
           " keys), head " + std::to_string(static_cast<int64_t>(i) / head_dim % q_heads) + ", element " +
           std::to_string(static_cast<int64_t>(i) % head_dim) + ": " + std::to_string(got[i]) + " for " +
           std::to_string(want[i]);
  }
  return "no element off";
}

TEST_P(CudaAttentionParity, MatchesCpuBackend) {
  const AttentionCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.rows * 11 + c.keys * 3 + c.head_dim));
  std::vector<float> q = random_floats(static_cast<size_t>(c.rows * c.q_heads * c.head_dim), rng, 2.0f);
  std::vector<float> k = random_floats(static_cast<size_t>(c.keys * c.kv_heads * c.head_dim), rng, 2.0f);
  std::vector<float> v = random_floats(static_cast<size_t>(c.keys * c.kv_heads * c.head_dim), rng);
  std::vector<int32_t> counts(static_cast<size_t>(c.rows), static_cast<int32_t>(c.keys));
  if (!c.same_count) {
    std::uniform_int_distribution<int32_t> count(0, static_cast<int32_t>(c.keys));
    for (int32_t& n : counts) n = count(rng);
    counts[0] = static_cast<int32_t>(c.keys);
    if (c.rows > 2) counts[1] = 0;  // a row that sees nothing gets zeros
    if (c.rows > 3) counts[2] = 1;
  }
  Tensor q_host = host_tensor(q, DType::kF32, {c.rows, c.q_heads, c.head_dim});
  Tensor k_host = host_tensor(k, DType::kF32, {c.keys, c.kv_heads, c.head_dim});
  Tensor v_host = host_tensor(v, DType::kF32, {c.keys, c.kv_heads, c.head_dim});
  Tensor counts_host = host_ints(counts);
  Tensor out_host = Tensor::zeros_cpu(DType::kF32, {c.rows, c.q_heads, c.head_dim});
  cpu_->attention(q_host, k_host, v_host, counts_host, out_host);

  Tensor out_gpu = poisoned({c.rows, c.q_heads, c.head_dim});
  Tensor q_gpu = to_gpu(q_host);
  if (c.shift_q) {
    Tensor shifted = gpu_->allocate(DType::kF32, {q_host.numel() + 1});
    q_gpu = shifted.slice_rows(1, q_host.numel()).reshape(q_host.shape());
    gpu_->copy_from_host(q.data(), q_gpu);
  }
  gpu_->attention(q_gpu, to_gpu(k_host), to_gpu(v_host), to_gpu(counts_host), out_gpu);
  const std::vector<float> got = download(out_gpu), want = host_values(out_host);
  const double error = normalized_error(got, want);
  EXPECT_LT(error, 1e-4) << c.name << ": " << first_attention_mismatch(got, want, counts, c.q_heads, c.head_dim);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttentionParity,
    ::testing::Values(AttentionCase{"DecodeGqa4", 1, 32, 8, 128, 300, true},
                      AttentionCase{"BlockGqa2", 16, 16, 8, 128, 77, true},
                      AttentionCase{"PerRowCountsGqa4", 16, 8, 2, 64, 129, false},
                      AttentionCase{"MhaOddHeadDim", 5, 4, 4, 20, 33, false},
                      AttentionCase{"OneKvHeadDim80", 9, 6, 1, 80, 200, false},
                      AttentionCase{"HeadDim256", 3, 2, 1, 256, 40, false},
                      AttentionCase{"SingleKey", 4, 4, 2, 16, 1, true},
                      AttentionCase{"LongContext", 2, 8, 8, 128, 4099, false},
                      AttentionCase{"ManyRowsOneSlice", 300, 8, 2, 64, 200, false},
                      AttentionCase{"SixteenHeadsPerKvHead", 2, 16, 1, 128, 500, false},
                      // Chunks of 4 rows or more take the 64-query tiles, fewer the 8-query
                      // (decode) tiles; a head dim not a multiple of 4 or a misaligned q the
                      // one-row kernel.
                      AttentionCase{"VerifyBlockLongContext", 16, 32, 8, 128, 4099, false},
                      AttentionCase{"HeadDim256Block", 6, 4, 1, 256, 100, false},
                      AttentionCase{"SixteenHeadsBlock", 12, 16, 1, 128, 300, false},
                      AttentionCase{"HeadDim18OneRowKernel", 6, 8, 2, 18, 150, false},
                      AttentionCase{"HeadDim18DecodeOneRowKernel", 1, 8, 2, 18, 700, true},
                      AttentionCase{"MisalignedDecodeOneRowKernel", 1, 32, 8, 128, 300, true, true},
                      AttentionCase{"MisalignedBlockOneRowKernel", 16, 8, 2, 64, 129, false, true},
                      AttentionCase{"MisalignedLongContextOneRowKernel", 2, 8, 8, 128, 4099, false, true}),
    [](const ::testing::TestParamInfo<AttentionCase>& p) { return std::string(p.param.name); });

// Many sequences in one call (more than one launch takes: 70 chunks), each with its own cache:
// the stored rows and the attention against the CPU's chunk-by-chunk default. Chunks of 0, 1,
// 3 and 16 rows at different cache lengths, some caches far larger than what is used (the
// attention grid follows the capacity, each row's slices its own count); causal counts, and a
// draft-like chunk seeing all.
TEST_F(CudaParity, StoreAndAttendManySequencesMatchesCpuBackend) {
  std::mt19937 rng(21);
  const int64_t q_heads = 8, kv_heads = 2, head_dim = 64, chunk_count = 70;
  const int64_t row_sizes[] = {1, 16, 0, 3};
  std::vector<CacheChunk> cpu_chunks, gpu_chunks;
  std::vector<Tensor> cpu_caches, gpu_caches;  // keys and values per chunk
  cpu_caches.reserve(2 * chunk_count);
  gpu_caches.reserve(2 * chunk_count);
  std::vector<int32_t> counts, store_at;
  int64_t rows = 0;
  for (int64_t c = 0; c < chunk_count; ++c) {
    const int64_t n = row_sizes[c % 4], start = (c * 37) % 300, capacity = start + n + 5 + (c % 3 == 0 ? 700 : 0);
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<float> old = random_floats(static_cast<size_t>(capacity * kv_heads * head_dim), rng, 2.0f);
      cpu_caches.push_back(host_tensor(old, DType::kF32, {capacity, kv_heads, head_dim}));
      gpu_caches.push_back(to_gpu(cpu_caches.back()));
    }
    cpu_chunks.push_back({&cpu_caches[2 * c], &cpu_caches[2 * c + 1], rows, n});
    gpu_chunks.push_back({&gpu_caches[2 * c], &gpu_caches[2 * c + 1], rows, n});
    for (int64_t i = 0; i < n; ++i) {
      store_at.push_back(static_cast<int32_t>(start + i));
      counts.push_back(static_cast<int32_t>(c % 5 == 1 ? start + n : start + i + 1));
    }
    rows += n;
  }
  std::vector<float> q = random_floats(static_cast<size_t>(rows * q_heads * head_dim), rng, 2.0f);
  std::vector<float> k = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng, 2.0f);
  std::vector<float> v = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng);
  Tensor q_host = host_tensor(q, DType::kF32, {rows, q_heads, head_dim});
  Tensor k_host = host_tensor(k, DType::kF32, {rows, kv_heads, head_dim});
  Tensor v_host = host_tensor(v, DType::kF32, {rows, kv_heads, head_dim});
  Tensor counts_host = host_ints(counts), store_host = host_ints(store_at);
  Tensor out_host = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, head_dim});
  cpu_->store_and_attend(q_host, k_host, v_host, cpu_chunks, store_host, counts_host, out_host);

  Tensor out_gpu = poisoned({rows, q_heads, head_dim});
  gpu_->store_and_attend(to_gpu(q_host), to_gpu(k_host), to_gpu(v_host), gpu_chunks, to_gpu(store_host),
                         to_gpu(counts_host), out_gpu);
  EXPECT_LT(normalized_error(download(out_gpu), host_values(out_host)), 1e-4);
  for (size_t i = 0; i < cpu_caches.size(); ++i) {
    ASSERT_EQ(download(gpu_caches[i]), host_values(cpu_caches[i]))
        << "cache " << i / 2 << (i % 2 ? " values" : " keys");
  }
}

// Chunks that do not cover q's rows are refused at the call; a row stored outside its cache is
// found on the device and fails the next copy to the host, after which the backend goes on.
TEST_F(CudaParity, StoreAndAttendRefusesChunksThatDoNotCoverTheRowsAndRowsOutsideTheCache) {
  Tensor q = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor kv = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor cache = gpu_->allocate(DType::kF32, {8, 2, 16});
  Tensor counts = to_gpu(host_ints({1, 2, 3, 4}));
  Tensor out = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor store_at = to_gpu(host_ints({5, 6, 7, 8}));
  const CacheChunk short_of_rows[] = {{&cache, &cache, 0, 3}};
  EXPECT_THROW(gpu_->store_and_attend(q, kv, kv, short_of_rows, store_at, counts, out), Error);
  const CacheChunk whole[] = {{&cache, &cache, 0, 4}};
  gpu_->store_and_attend(q, kv, kv, whole, store_at, counts, out);
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  EXPECT_THROW(gpu_->copy_to_host(out, sink.data()), Error);
  gpu_->copy_to_host(out, sink.data());
}

TEST_F(CudaParity, StoreRowsMatchesCpuBackend) {
  std::mt19937 rng(23);
  std::vector<float> src = random_floats(5 * 3 * 8, rng), old = random_floats(9 * 3 * 8, rng);
  Tensor src_host = host_tensor(src, DType::kF32, {5, 3, 8});
  Tensor dst_host = host_tensor(old, DType::kF32, {9, 3, 8});
  Tensor rows_host = host_ints({8, 0, 4, 5, 2});
  Tensor dst_gpu = to_gpu(dst_host);
  cpu_->store_rows(src_host, dst_host, rows_host);
  gpu_->store_rows(to_gpu(src_host), dst_gpu, to_gpu(rows_host));
  EXPECT_EQ(download(dst_gpu), host_values(dst_host));
}

// Rows picked in any order, one twice; a row outside the source fails the next copy to the host.
TEST_F(CudaParity, GatherRowsMatchesCpuBackendAndRefusesRowsOutsideTheSource) {
  std::mt19937 rng(24);
  std::vector<float> src = random_floats(9 * 3 * 8, rng);
  Tensor src_host = host_tensor(src, DType::kF32, {9, 3, 8});
  Tensor rows_host = host_ints({8, 0, 4, 4, 2});
  Tensor dst_host = Tensor::zeros_cpu(DType::kF32, {5, 3, 8});
  cpu_->gather_rows(src_host, rows_host, dst_host);
  Tensor src_gpu = to_gpu(src_host), dst_gpu = poisoned({5, 3, 8});
  gpu_->gather_rows(src_gpu, to_gpu(rows_host), dst_gpu);
  EXPECT_EQ(download(dst_gpu), host_values(dst_host));

  gpu_->gather_rows(src_gpu, to_gpu(host_ints({1, 9, 0, 0, 0})), dst_gpu);
  std::vector<float> sink(static_cast<size_t>(dst_gpu.numel()));
  EXPECT_THROW(gpu_->copy_to_host(dst_gpu, sink.data()), Error);
  gpu_->copy_to_host(dst_gpu, sink.data());
}

// A pass captured as a CUDA graph and replayed with new ids, positions and key counts against
// the same pass run directly on the CPU: embedding, norm, the few-row matmul, store_and_attend
// into a cache, argmax. Then the refusals while capturing.
TEST_F(CudaParity, CapturedPassReplaysWithNewInputsAsTheCpuRunsThem) {
  std::mt19937 rng(31);
  const int64_t vocab = 300, hidden = 256, heads = 2, head_dim = 128, rows = 4;
  std::vector<float> table = random_floats(static_cast<size_t>(vocab * hidden), rng);
  std::vector<float> head = random_floats(static_cast<size_t>(vocab * hidden), rng, 0.5f);
  std::vector<float> norm = random_floats(static_cast<size_t>(hidden), rng);
  struct Run {
    Backend* backend;
    Tensor table, head, norm, ids, store_at, counts, h, q, cache, attended, logits, next;
  };
  auto make = [&](Backend& b) {
    auto on = [&](Tensor host) { return &b == gpu_.get() ? to_gpu(host) : host; };
    Run r{&b,
          on(host_tensor(table, DType::kBF16, {vocab, hidden})),
          on(host_tensor(head, DType::kBF16, {vocab, hidden})),
          on(host_tensor(norm, DType::kF32, {hidden})),
          b.allocate(DType::kI32, {rows}),
          b.allocate(DType::kI32, {rows}),
          b.allocate(DType::kI32, {rows}),
          b.allocate(DType::kF32, {rows, hidden}),
          b.allocate(DType::kF32, {rows, heads, head_dim}),
          b.allocate(DType::kF32, {rows, heads, head_dim}),
          b.allocate(DType::kF32, {rows, heads, head_dim}),
          b.allocate(DType::kF32, {rows, vocab}),
          b.allocate(DType::kI32, {rows})};
    return r;
  };
  auto pass = [](Run& r) {
    Backend& b = *r.backend;
    b.embedding(r.table, r.ids, r.h);
    b.rmsnorm(r.h, r.norm, 1e-6f, r.h);
    Tensor as_heads = r.h.reshape({rows, heads, head_dim});
    const CacheChunk chunk[] = {{&r.cache, &r.cache, 0, rows}};
    b.store_and_attend(as_heads, as_heads, as_heads, chunk, r.store_at, r.counts, r.attended);
    b.matmul(r.attended.reshape({rows, hidden}), r.head, r.logits);
    b.argmax(r.logits, r.next);
  };
  auto upload = [](Run& r, const std::vector<int32_t>& ids, const std::vector<int32_t>& counts) {
    const std::vector<int32_t> store_at = {0, 1, 2, 3};
    r.backend->copy_from_host(ids.data(), r.ids);
    r.backend->copy_from_host(store_at.data(), r.store_at);
    r.backend->copy_from_host(counts.data(), r.counts);
  };
  Run cpu = make(*cpu_), gpu = make(*gpu_);
  const std::vector<int32_t> ids_a = {5, 17, 299, 0}, ids_b = {42, 42, 7, 123};
  const std::vector<int32_t> causal = {1, 2, 3, 4}, all = {4, 4, 4, 4};
  upload(gpu, ids_a, causal);
  pass(gpu);  // once directly, so the scratch buffers have their size before capture
  std::unique_ptr<CapturedOps> graph = gpu_->capture([&] { pass(gpu); });
  for (const auto& [ids, counts] : {std::pair{ids_a, causal}, std::pair{ids_b, all}}) {
    upload(cpu, ids, counts);
    pass(cpu);
    upload(gpu, ids, counts);
    gpu_->replay(*graph);
    EXPECT_LT(normalized_error(download(gpu.logits), host_values(cpu.logits)), 1e-2);
    std::vector<int32_t> next(static_cast<size_t>(rows));
    gpu_->copy_to_host(gpu.next, next.data());
    std::vector<int32_t> want(cpu.next.data<int32_t>(), cpu.next.data<int32_t>() + rows);
    EXPECT_EQ(next, want);
  }

  std::vector<int32_t> host(static_cast<size_t>(rows));
  EXPECT_THROW(gpu_->capture([&] { gpu_->copy_from_host(host.data(), gpu.ids); }), Error);
  EXPECT_THROW(gpu_->capture([&] { gpu_->copy_to_host(gpu.ids, host.data()); }), Error);
  EXPECT_THROW(gpu_->capture([&] { gpu_->allocate(DType::kF32, {2}); }), Error);
  upload(gpu, ids_a, causal);  // the backend runs ops directly again
  pass(gpu);
  gpu_->copy_to_host(gpu.next, host.data());
}

TEST_F(CudaParity, AttentionKeyCountBeyondKeysFailsAtTheNextCopyToHost) {
  Tensor q = gpu_->allocate(DType::kF32, {1, 2, 16});
  Tensor kv = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor counts = to_gpu(host_ints({5}));
  Tensor out = gpu_->allocate(DType::kF32, {1, 2, 16});
  gpu_->attention(q, kv, kv, counts, out);
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  try {
    gpu_->copy_to_host(out, sink.data());
    FAIL() << "a key count beyond the keys was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal) << e.what();
  }
  gpu_->copy_to_host(out, sink.data());  // reported once; the backend stays usable
}

// The fused q/k norm + RoPE against the CPU's two ops, for Qwen3 and odd shapes, every weight
// dtype; rows at scattered positions.
TEST_F(CudaParity, HeadNormRopeMatchesCpuRmsnormThenRope) {
  std::mt19937 rng(13);
  struct Shape3 {
    int64_t rows, heads, head_dim;
  };
  for (const Shape3 shape : {Shape3{1, 32, 128}, Shape3{16, 8, 128}, Shape3{7, 3, 10}, Shape3{33, 2, 64},
                             Shape3{5, 4, 7}}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      std::vector<float> x = random_floats(static_cast<size_t>(shape.rows * shape.heads * shape.head_dim), rng, 3.0f);
      std::vector<float> w = random_floats(static_cast<size_t>(shape.head_dim), rng);
      std::vector<int32_t> positions;
      for (int64_t r = 0; r < shape.rows; ++r) positions.push_back(static_cast<int32_t>((r * 977) % 40000));
      Tensor w_host = host_tensor(w, dtype, {shape.head_dim});
      Tensor x_host = host_tensor(x, DType::kF32, {shape.rows, shape.heads, shape.head_dim});
      Tensor heads_host = x_host.reshape({shape.rows * shape.heads, shape.head_dim});
      cpu_->rmsnorm(heads_host, w_host, 1e-6f, heads_host);
      cpu_->rope(x_host, host_ints(positions), 1e6f);
      Tensor x_gpu = to_gpu(host_tensor(x, DType::kF32, {shape.rows, shape.heads, shape.head_dim}));
      gpu_->head_norm_rope(x_gpu, gpu_->upload_weight(w_host), 1e-6f, to_gpu(host_ints(positions)), 1e6f);
      EXPECT_LT(normalized_error(download(x_gpu), host_values(x_host)), 1e-5)
          << dtype_name(dtype) << " rows " << shape.rows << " heads " << shape.heads << " head_dim " << shape.head_dim;
    }
  }
}

// ---- embedding and argmax ----

TEST_F(CudaParity, EmbeddingMatchesCpuBackendForEveryDtype) {
  std::mt19937 rng(9);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t dim : {7, 64, 1024}) {
      const int64_t vocab = 301;
      std::vector<float> table = random_floats(static_cast<size_t>(vocab * dim), rng);
      Tensor table_host = host_tensor(table, dtype, {vocab, dim});
      std::vector<int32_t> ids = {0, 300, 5, 5, 17, 299, 1, 150, 42, 7, 8, 9, 10, 11, 12, 13, 250};
      Tensor ids_host = host_ints(ids);
      const int64_t rows = static_cast<int64_t>(ids.size());
      Tensor out_host = Tensor::zeros_cpu(DType::kF32, {rows, dim});
      cpu_->embedding(table_host, ids_host, out_host);
      Tensor out_gpu = poisoned({rows, dim});
      gpu_->embedding(gpu_->upload_weight(table_host), to_gpu(ids_host), out_gpu);
      // Widening is exact: the rows are equal.
      EXPECT_EQ(download(out_gpu), host_values(out_host)) << dtype_name(dtype) << " dim " << dim;
    }
  }
}

TEST_F(CudaParity, EmbeddingIdOutsideTableFailsAtTheNextCopyToHost) {
  Tensor table = gpu_->allocate(DType::kBF16, {10, 8});
  Tensor out = gpu_->allocate(DType::kF32, {2, 8});
  gpu_->embedding(table, to_gpu(host_ints({3, 10})), out);
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  try {
    gpu_->copy_to_host(out, sink.data());
    FAIL() << "token id 10 of a 10-row table was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("token id 10"), std::string::npos) << e.what();
  }
  gpu_->embedding(table, to_gpu(host_ints({3, 9})), out);
  gpu_->copy_to_host(out, sink.data());  // the error was reported once; valid ids work again
}

TEST_F(CudaParity, ArgmaxMatchesCpuBackendWithTiesToTheLowestIndex) {
  std::mt19937 rng(10);
  for (int64_t vocab : {1, 7, 1000, 151936}) {
    for (int64_t rows : {1, 3, 16}) {
      std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), rng, 10.0f);
      for (int64_t m = 0; m < rows && vocab > 2; ++m) {
        // A tie for the maximum in every other row, the two copies far apart so that different
        // threads find them.
        if (m % 2 == 0) {
          const int64_t a = (m * 7919) % vocab, b = (a + vocab / 2 + 1) % vocab;
          logits[m * vocab + a] = logits[m * vocab + b] = 50.0f;
        }
      }
      Tensor logits_host = host_tensor(logits, DType::kF32, {rows, vocab});
      Tensor ids_host = Tensor::zeros_cpu(DType::kI32, {rows});
      cpu_->argmax(logits_host, ids_host);
      Tensor ids_gpu = gpu_->allocate(DType::kI32, {rows});
      std::vector<int32_t> poison(static_cast<size_t>(rows), -1);
      gpu_->copy_from_host(poison.data(), ids_gpu);
      gpu_->argmax(to_gpu(logits_host), ids_gpu);
      std::vector<int32_t> got(static_cast<size_t>(rows));
      gpu_->copy_to_host(ids_gpu, got.data());
      EXPECT_EQ(got, std::vector<int32_t>(ids_host.data<int32_t>(), ids_host.data<int32_t>() + rows))
          << "vocab " << vocab << " rows " << rows;
    }
  }
}

// Logits 4 bytes off 16-byte alignment take the kernel's 4-byte loads, the rest 16-byte loads.
TEST_F(CudaParity, ArgmaxOfUnalignedLogitsMatchesCpuBackend) {
  std::mt19937 rng(12);
  const int64_t rows = 3, vocab = 1000;
  std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), rng, 10.0f);
  logits[5] = logits[900] = 60.0f;        // a tie in row 0
  logits[vocab + 999] = 70.0f;            // the last element of row 1
  logits[2 * vocab + 3] = std::nanf("");  // NaN never wins
  Tensor logits_host = host_tensor(logits, DType::kF32, {rows, vocab});
  Tensor ids_host = Tensor::zeros_cpu(DType::kI32, {rows});
  cpu_->argmax(logits_host, ids_host);
  Tensor shifted = gpu_->allocate(DType::kF32, {rows * vocab + 1});
  Tensor logits_gpu = shifted.slice_rows(1, rows * vocab).reshape({rows, vocab});
  gpu_->copy_from_host(logits.data(), logits_gpu);
  Tensor ids_gpu = gpu_->allocate(DType::kI32, {rows});
  gpu_->argmax(to_gpu(logits_host), ids_gpu);
  std::vector<int32_t> aligned(static_cast<size_t>(rows)), unaligned(static_cast<size_t>(rows));
  gpu_->copy_to_host(ids_gpu, aligned.data());
  Tensor unaligned_ids = gpu_->allocate(DType::kI32, {rows});
  gpu_->argmax(logits_gpu, unaligned_ids);
  gpu_->copy_to_host(unaligned_ids, unaligned.data());
  const std::vector<int32_t> want(ids_host.data<int32_t>(), ids_host.data<int32_t>() + rows);
  EXPECT_EQ(want, (std::vector<int32_t>{5, 999, want[2]}));
  EXPECT_EQ(aligned, want);
  EXPECT_EQ(unaligned, want);
}

// Sampling on the device draws what the CPU twin draws for the same uniform: the same kept set
// (top-k and top-p, ties by index: quantised logits make many ties), and the same id unless the
// uniform falls within float rounding of a boundary of the cumulative weights (a few in 10^5;
// at most 2 of the rows here). Temperature 0 is the argmax.
TEST_F(CudaParity, SampleMatchesCpuBackendForTheSameUniforms) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int64_t vocab : {5, 1000, 151936}) {
    for (bool quantised : {false, true}) {
      const int64_t rows = 64;
      std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), rng, 8.0f);
      if (quantised) {
        for (float& l : logits) l = std::round(l);
      }
      std::vector<float> params;
      for (int64_t m = 0; m < rows; ++m) {
        const float temperature = m % 8 == 0 ? 0.0f : 0.3f + 0.2f * static_cast<float>(m % 5);
        const float top_k = m % 3 == 0 ? 0.0f : static_cast<float>(1 + (m * 37) % 60);
        const float top_p = m % 4 == 0 ? 1.0f : 0.5f + 0.1f * static_cast<float>(m % 5);
        params.insert(params.end(), {temperature, top_k, top_p, uniform(rng)});
      }
      Tensor logits_host = host_tensor(logits, DType::kF32, {rows, vocab});
      Tensor params_host = host_tensor(params, DType::kF32, {rows, 4});
      Tensor ids_host = Tensor::zeros_cpu(DType::kI32, {rows});
      cpu_->sample(logits_host, params_host, ids_host);
      Tensor ids_gpu = gpu_->allocate(DType::kI32, {rows});
      std::vector<int32_t> poison(static_cast<size_t>(rows), -1);
      gpu_->copy_from_host(poison.data(), ids_gpu);
      gpu_->sample(to_gpu(logits_host), to_gpu(params_host), ids_gpu);
      std::vector<int32_t> got(static_cast<size_t>(rows));
      gpu_->copy_to_host(ids_gpu, got.data());
      int differing = 0;
      for (int64_t m = 0; m < rows; ++m) {
        ASSERT_GE(got[m], 0) << "row " << m << " was not written";
        ASSERT_LT(got[m], vocab);
        if (params[4 * m] == 0.0f) {
          EXPECT_EQ(got[m], ids_host.data<int32_t>()[m]) << "greedy row " << m;
        } else {
          differing += got[m] != ids_host.data<int32_t>()[m];
        }
      }
      EXPECT_LE(differing, 2) << "vocab " << vocab << (quantised ? " quantised" : "");
    }
  }
}

// ---- memory and copies ----

TEST_F(CudaParity, AllocateIsZeroFilledAndCopiesRoundTrip) {
  Tensor t = gpu_->allocate(DType::kF32, {5, 3});
  EXPECT_EQ(download(t), std::vector<float>(15, 0.0f));
  std::vector<float> values(15);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 4.5f;
  gpu_->copy_from_host(values.data(), t);
  EXPECT_EQ(download(t), values);
  EXPECT_EQ(download(t.slice_rows(2, 2)), std::vector<float>(values.begin() + 6, values.begin() + 12));
}

TEST_F(CudaParity, CopyRowsAndCopyColumnsMatchCpuBackend) {
  std::mt19937 rng(12);
  std::vector<float> src = random_floats(3 * 4 * 8, rng);
  std::vector<float> dst = random_floats(10 * 4 * 8, rng);
  Tensor src_host = host_tensor(src, DType::kF32, {3, 4, 8});
  Tensor dst_host = host_tensor(dst, DType::kF32, {10, 4, 8});
  Tensor dst_gpu = to_gpu(dst_host);
  cpu_->copy_rows(src_host, dst_host, 6);
  gpu_->copy_rows(to_gpu(src_host), dst_gpu, 6);
  EXPECT_EQ(download(dst_gpu), host_values(dst_host));

  std::vector<float> narrow = random_floats(5 * 3, rng);
  std::vector<float> wide = random_floats(5 * 11, rng);
  Tensor narrow_host = host_tensor(narrow, DType::kF32, {5, 3});
  Tensor wide_host = host_tensor(wide, DType::kF32, {5, 11});
  Tensor wide_gpu = to_gpu(wide_host);
  cpu_->copy_columns(narrow_host, wide_host, 7);
  gpu_->copy_columns(to_gpu(narrow_host), wide_gpu, 7);
  EXPECT_EQ(download(wide_gpu), host_values(wide_host));
}

TEST_F(CudaParity, TensorsFromTheHostAreRefusedByOps) {
  Tensor host = Tensor::zeros_cpu(DType::kF32, {2, 4});
  Tensor gpu = gpu_->allocate(DType::kF32, {2, 4});
  EXPECT_THROW(gpu_->add(gpu, host), Error);
  EXPECT_THROW(gpu_->copy_rows(host, gpu, 0), Error);
}

}  // namespace
}  // namespace flashq
