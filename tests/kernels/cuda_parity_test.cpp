// Every op of the CUDA backend against the CPU backend (the reference) on random inputs, as
// llama.cpp's backend-ops test does: decode (M = 1), blocks (M = 16), odd sizes that miss every
// vector width, GQA ratios, key counts that differ per row. Outputs are filled with NaN before
// each op so an element the kernel never writes fails the comparison. Tolerance, relative to the
// largest reference value: 1e-4 with f32 weights, 1e-2 with bf16/f16 weights.
//
// Without a CUDA device every test skips (GTEST_SKIP) saying so.
#include <array>
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

// Rows of a multiple of 4 floats up to 16384, 16-byte aligned, take the float4 kernel; other
// dims, and x 4 bytes off alignment (`shift`), the one that loops over the row.
struct NormCase {
  DType w_dtype;
  int64_t rows, dim;
  bool shift = false;
};

void PrintTo(const NormCase& c, std::ostream* os) {
  *os << dtype_name(c.w_dtype) << " rows=" << c.rows << " dim=" << c.dim << (c.shift ? " shifted" : "");
}

class CudaNormParity : public CudaParity, public ::testing::WithParamInterface<NormCase> {
 protected:
  // host's contents on the GPU, 4 bytes past a 16-byte boundary when the case shifts.
  Tensor to_gpu_as_the_case_says(const Tensor& host) {
    if (!GetParam().shift) return to_gpu(host);
    Tensor spaced = gpu_->allocate(host.dtype(), {host.numel() + 1});
    Tensor shifted = spaced.slice_rows(1, host.numel()).reshape(host.shape());
    gpu_->copy_from_host(host.raw(), shifted);
    return shifted;
  }
};

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
  gpu_->rmsnorm(to_gpu_as_the_case_says(x_host), w_gpu, 1e-6f, y_gpu);
  EXPECT_LT(normalized_error(download(y_gpu), host_values(y_host)), 1e-4) << "rows=" << c.rows << " dim=" << c.dim;

  // In place, as the per-head q_norm and k_norm run.
  Tensor in_place = to_gpu_as_the_case_says(x_host);
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
  Tensor h_gpu = to_gpu_as_the_case_says(h_host);
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
  cases.push_back({DType::kBF16, 3, 4098});
  cases.push_back({DType::kBF16, 3, 16384});  // the float4 kernel's longest row
  cases.push_back({DType::kF32, 2, 20000});
  cases.push_back({DType::kBF16, 16, 4096, true});
  cases.push_back({DType::kF32, 1, 1000, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaNormParity, ::testing::ValuesIn(norm_cases()),
                         [](const ::testing::TestParamInfo<NormCase>& p) {
                           return std::string(dtype_name(p.param.w_dtype)) + "_rows" + std::to_string(p.param.rows) +
                                  "_dim" + std::to_string(p.param.dim) + (p.param.shift ? "_shifted" : "");
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
  logits[2 * vocab] = logits[2 * vocab + 3] = std::nanf("");  // NaN never wins, even first
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

// Signed zeros are one value (their ties go by index) and NaN reads as -inf, as on the CPU: cases
// whose draw is fixed whatever the rounding, so the ids must be equal.
TEST_F(CudaParity, SampleTakesSignedZerosAsOneValueAndNanAsMinusInfinity) {
  const int64_t vocab = 8;
  const float nan = std::nanf("");
  const std::vector<std::vector<float>> rows = {
      {-0.0f, 0.0f, -1.0f, -2.0f, nan, -3.0f, 0.0f, -0.0f},  // four zeros tie for the top
      {nan, 1.0f, 5.0f, 2.0f, nan, 5.0f, -1.0f, nan},        // NaN first; 5 at 2 and 5
  };
  // {temperature, top_k, top_p, u}: greedy, top-1, top-2 drawn low and high, top-p of one weight.
  const std::vector<std::array<float, 4>> params = {{0.0f, 0.0f, 1.0f, 0.5f},
                                                    {1.0f, 1.0f, 1.0f, 0.9f},
                                                    {1.0f, 2.0f, 1.0f, 0.25f},
                                                    {1.0f, 2.0f, 1.0f, 0.75f},
                                                    {1.0f, 0.0f, 0.1f, 0.9f}};
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const std::array<float, 4>& p : params) {
      std::vector<float> row = rows[r], row_params(p.begin(), p.end());
      Tensor logits_host = host_tensor(row, DType::kF32, {1, vocab});
      Tensor params_host = host_tensor(row_params, DType::kF32, {1, 4});
      Tensor want = Tensor::zeros_cpu(DType::kI32, {1});
      cpu_->sample(logits_host, params_host, want);
      Tensor ids_gpu = gpu_->allocate(DType::kI32, {1});
      gpu_->sample(to_gpu(logits_host), to_gpu(params_host), ids_gpu);
      int32_t got = -1;
      gpu_->copy_to_host(ids_gpu, &got);
      EXPECT_EQ(got, want.data<int32_t>()[0]) << "row " << r << " top_k " << p[1] << " top_p " << p[2] << " u " << p[3];
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
