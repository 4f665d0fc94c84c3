// The CUDA backend's attention and KV-cache ops against the CPU backend (the reference): the
// three attention kernels (8- and 64-query tiles, one row a block) over one row, causal and
// draft blocks, many sequences and long contexts; storing and gathering rows; errors found on
// the device. Same conventions as cuda_parity_test.cpp, in the same binary.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "shared/error.h"
#include "tests/kernels/cuda_parity_fixture.h"

namespace flashq {
namespace {

struct AttentionCase {
  const char* name;
  int64_t rows, q_heads, kv_heads, head_dim, keys;
  bool same_count;  // every row sees all keys (a draft block); else per-row counts in [0, keys]
  // q 4 bytes off 16-byte alignment: the float4 tile kernels refuse it, the one-row kernel takes it
  bool shift_q = false;
  bool no_keys = false;  // every row sees nothing: zeros, though the keys are split into slices
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

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

class CudaAttentionParity : public CudaParity, public ::testing::WithParamInterface<AttentionCase> {
 protected:
  void expect_matches_cpu(const AttentionCase& c);
};

void CudaAttentionParity::expect_matches_cpu(const AttentionCase& c) {
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
  if (c.no_keys) std::fill(counts.begin(), counts.end(), 0);
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
  const Tensor k_gpu = to_gpu(k_host), v_gpu = to_gpu(v_host), counts_gpu = to_gpu(counts_host);
  gpu_->attention(q_gpu, k_gpu, v_gpu, counts_gpu, out_gpu);
  const std::vector<float> got = download(out_gpu), want = host_values(out_host);
  const double error = normalized_error(got, want);
  EXPECT_LT(error, 1e-4) << c.name << ": " << first_attention_mismatch(got, want, counts, c.q_heads, c.head_dim);

  // Again: the tiles' slice counters must be back at zero, or no block would merge this time.
  Tensor again = poisoned({c.rows, c.q_heads, c.head_dim});
  gpu_->attention(q_gpu, k_gpu, v_gpu, counts_gpu, again);
  EXPECT_EQ(download(again), got) << c.name << ": a second call differs";
}

TEST_P(CudaAttentionParity, MatchesCpuBackend) { expect_matches_cpu(GetParam()); }

// FLASHQ_CUDA_ATTENTION=one-row sends every shape to the one-row kernel (the escape should a
// tile kernel misbehave on some device) with the CPU's results still; a value other than tiles
// or one-row is refused when the backend is made.
TEST_F(CudaAttentionParity, OneRowKernelChosenByTheEnvironmentForEveryShape) {
  struct BackToTheDefault {
    ~BackToTheDefault() { unsetenv("FLASHQ_CUDA_ATTENTION"); }
  } restore;
  setenv("FLASHQ_CUDA_ATTENTION", "sideways", 1);
  try {
    make_backend("cuda");
    ADD_FAILURE() << "FLASHQ_CUDA_ATTENTION=sideways was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
  setenv("FLASHQ_CUDA_ATTENTION", "one-row", 1);
  gpu_ = make_backend("cuda");
  expect_matches_cpu({"DecodeGqa4OneRowByChoice", 1, 32, 8, 128, 300, true});
  expect_matches_cpu({"VerifyBlockOneRowByChoice", 16, 32, 8, 128, 1000, false});
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
                      AttentionCase{"MisalignedLongContextOneRowKernel", 2, 8, 8, 128, 4099, false, true},
                      AttentionCase{"DecodeTilesNoRowSeesAKey", 3, 32, 8, 128, 300, false, false, true},
                      AttentionCase{"BlockTilesNoRowSeesAKey", 8, 8, 2, 64, 300, false, false, true}),
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

}  // namespace
}  // namespace flashq
