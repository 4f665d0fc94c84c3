// The CUDA backend's fused ops against the CPU backend and against its own unfused ops, whose
// very bits they must give, so fusing changes no token:
// - matmul_many (several weights of one x in one launch) and matmul_swiglu (the MLP's gate and
//   up products with SwiGLU in one launch), where the tensor-core kernel for few rows takes
//   them; elsewhere (many rows, f32 weights, K not a multiple of 32) they are the unfused ops;
// - store_and_attend with the q/k norm and RoPE, or RoPE alone (one launch from the q/k/v
//   products to the caches), and store_kv, its KV half (the drafter's injection).
//
// Without a CUDA device every test skips (GTEST_SKIP) saying so.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "shared/error.h"
#include "tests/kernels/cuda_parity_fixture.h"

namespace flashq {
namespace {

struct Weights {
  Tensor host, gpu;
};

class CudaFusedParity : public CudaParity {
 protected:
  Weights random_weights(std::mt19937& rng, DType dtype, int64_t n, int64_t k) {
    std::vector<float> values = random_floats(static_cast<size_t>(n * k), rng, 0.5f);
    Tensor host = host_tensor(values, dtype, {n, k});
    return {host, gpu_->upload_weight(host)};
  }

  Tensor random_x(std::mt19937& rng, int64_t m, int64_t k) {
    std::vector<float> values = random_floats(static_cast<size_t>(m * k), rng);
    return host_tensor(values, DType::kF32, {m, k});
  }
};

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << what << ", element " << i;
}

// q, k and v shapes (odd n leaves partial tiles), and a drafter's 2 x 9 layers of k and v: more
// products than one launch takes.
TEST_F(CudaFusedParity, MatmulManyMatchesCpuAndEachProductAlone) {
  std::mt19937 rng(11);
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t m : {1, 5, 16, 17, 64, 128, 129}) {
      for (const std::vector<int64_t>& widths : {std::vector<int64_t>{96, 40, 40}, std::vector<int64_t>(18, 24)}) {
        const int64_t k = 256;
        const std::string what = std::string(dtype_name(dtype)) + " m=" + std::to_string(m) + " products=" +
                                 std::to_string(widths.size());
        Tensor x_host = random_x(rng, m, k);
        Tensor x_gpu = to_gpu(x_host);
        std::vector<Weights> weights;
        std::vector<Tensor> outputs;
        for (int64_t n : widths) {
          weights.push_back(random_weights(rng, dtype, n, k));
          outputs.push_back(poisoned({m, n}));
        }
        std::vector<WeightProduct> products;
        for (size_t i = 0; i < widths.size(); ++i) products.push_back({&weights[i].gpu, &outputs[i]});
        gpu_->matmul_many(x_gpu, products);

        for (size_t i = 0; i < widths.size(); ++i) {
          Tensor want = Tensor::zeros_cpu(DType::kF32, {m, widths[i]});
          cpu_->matmul(x_host, weights[i].host, want);
          const std::vector<float> got = download(outputs[i]);
          EXPECT_LT(normalized_error(got, host_values(want)), tolerance_for(dtype)) << what << ", product " << i;
          Tensor alone = poisoned({m, widths[i]});
          gpu_->matmul(x_gpu, weights[i].gpu, alone);
          expect_same_bits(got, download(alone), what + ", product " + std::to_string(i) + " against matmul");
        }
      }
    }
  }
}

TEST_F(CudaFusedParity, MatmulManyRefusesAProductWithoutOutputOrOfTheWrongShape) {
  std::mt19937 rng(12);
  Tensor x = to_gpu(random_x(rng, 2, 64));
  Weights w = random_weights(rng, DType::kBF16, 32, 64);
  Tensor y = poisoned({2, 32});
  const WeightProduct no_output[] = {{&w.gpu, &y}, {&w.gpu, nullptr}};
  EXPECT_THROW(gpu_->matmul_many(x, no_output), Error);
  Tensor narrow = poisoned({2, 16});
  const WeightProduct wrong_shape[] = {{&w.gpu, &y}, {&w.gpu, &narrow}};
  EXPECT_THROW(gpu_->matmul_many(x, wrong_shape), Error);
}

// n = 76 leaves a partial block of 8; K = 320 takes the tensor-core kernel, K = 100 does not.
TEST_F(CudaFusedParity, MatmulSwigluMatchesCpuAndTheThreeOps) {
  std::mt19937 rng(13);
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t k : {320, 100}) {
      for (int64_t m : {1, 3, 16, 40, 128, 129}) {
        const int64_t n = 76;
        const std::string what =
            std::string(dtype_name(dtype)) + " m=" + std::to_string(m) + " k=" + std::to_string(k);
        Tensor x_host = random_x(rng, m, k);
        Weights gate = random_weights(rng, dtype, n, k), up = random_weights(rng, dtype, n, k);
        Tensor want = Tensor::zeros_cpu(DType::kF32, {m, n}), up_host = Tensor::zeros_cpu(DType::kF32, {m, n});
        cpu_->matmul_swiglu(x_host, gate.host, up.host, want, up_host);

        Tensor x_gpu = to_gpu(x_host);
        Tensor out = poisoned({m, n}), scratch = poisoned({m, n});
        gpu_->matmul_swiglu(x_gpu, gate.gpu, up.gpu, out, scratch);
        const std::vector<float> got = download(out);
        EXPECT_LT(normalized_error(got, host_values(want)), tolerance_for(dtype)) << what;

        Tensor gate_out = poisoned({m, n}), up_out = poisoned({m, n});
        gpu_->matmul(x_gpu, gate.gpu, gate_out);
        gpu_->matmul(x_gpu, up.gpu, up_out);
        gpu_->swiglu(gate_out, up_out, gate_out);
        expect_same_bits(got, download(gate_out), what + " against matmul, matmul, swiglu");
      }
    }
  }
}

// A row's MLP output must not depend on the rows beside it, as for matmul: decoding a row and
// verifying it in a block of 128 give the same bits.
TEST_F(CudaFusedParity, MatmulSwigluRowDoesNotDependOnTheOtherRowsUpTo128Rows) {
  std::mt19937 rng(14);
  const int64_t m = 128, n = 200, k = 512;
  Tensor x_gpu = to_gpu(random_x(rng, m, k));
  Weights gate = random_weights(rng, DType::kBF16, n, k), up = random_weights(rng, DType::kBF16, n, k);
  Tensor block = poisoned({m, n}), scratch = poisoned({m, n});
  gpu_->matmul_swiglu(x_gpu, gate.gpu, up.gpu, block, scratch);
  const std::vector<float> block_values = download(block);
  for (int64_t row : {0, 5, 15, 64, 127}) {
    Tensor single = poisoned({1, n}), single_scratch = poisoned({1, n});
    gpu_->matmul_swiglu(x_gpu.slice_rows(row, 1), gate.gpu, up.gpu, single, single_scratch);
    const std::vector<float> single_values = download(single);
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(single_values[j], block_values[row * n + j]) << "row " << row << " col " << j;
    }
  }
}

// Many sequences (more than one launch's chunks) of 0, 1, 3 and 16 rows, with the q/k norm and
// RoPE: against the CPU, and bit for bit against head_norm_rope, head_norm_rope and
// store_and_attend without it on the GPU (out, q and k in place, every cache).
TEST_F(CudaFusedParity, StoreAndAttendWithNormRopeIsHeadNormRopeThenStoreAndAttend) {
  std::mt19937 rng(15);
  const int64_t q_heads = 8, kv_heads = 2, head_dim = 64, chunk_count = 70;
  const int64_t row_sizes[] = {1, 16, 0, 3};
  std::vector<Tensor> cpu_caches, fused_caches, apart_caches;
  for (auto* caches : {&cpu_caches, &fused_caches, &apart_caches}) caches->reserve(2 * chunk_count);
  std::vector<CacheChunk> cpu_chunks, fused_chunks, apart_chunks;
  std::vector<int32_t> counts, store_at, positions;
  int64_t rows = 0;
  for (int64_t c = 0; c < chunk_count; ++c) {
    const int64_t n = row_sizes[c % 4], start = (c * 37) % 300, capacity = start + n + 5;
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<float> old = random_floats(static_cast<size_t>(capacity * kv_heads * head_dim), rng, 2.0f);
      cpu_caches.push_back(host_tensor(old, DType::kF32, {capacity, kv_heads, head_dim}));
      fused_caches.push_back(to_gpu(cpu_caches.back()));
      apart_caches.push_back(to_gpu(cpu_caches.back()));
    }
    cpu_chunks.push_back({&cpu_caches[2 * c], &cpu_caches[2 * c + 1], rows, n});
    fused_chunks.push_back({&fused_caches[2 * c], &fused_caches[2 * c + 1], rows, n});
    apart_chunks.push_back({&apart_caches[2 * c], &apart_caches[2 * c + 1], rows, n});
    for (int64_t i = 0; i < n; ++i) {
      store_at.push_back(static_cast<int32_t>(start + i));
      positions.push_back(static_cast<int32_t>(start + i + 40000 * (c % 2)));  // RoPE angles far from the rows
      counts.push_back(static_cast<int32_t>(c % 5 == 1 ? start + n : start + i + 1));
    }
    rows += n;
  }
  std::vector<float> q = random_floats(static_cast<size_t>(rows * q_heads * head_dim), rng, 3.0f);
  std::vector<float> k = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng, 3.0f);
  std::vector<float> v = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng);
  std::vector<float> q_w = random_floats(static_cast<size_t>(head_dim), rng);
  std::vector<float> k_w = random_floats(static_cast<size_t>(head_dim), rng);
  Tensor q_host = host_tensor(q, DType::kF32, {rows, q_heads, head_dim});
  Tensor k_host = host_tensor(k, DType::kF32, {rows, kv_heads, head_dim});
  Tensor v_host = host_tensor(v, DType::kF32, {rows, kv_heads, head_dim});
  Tensor q_norm_host = host_tensor(q_w, DType::kBF16, {head_dim});  // the two norms in different dtypes
  Tensor k_norm_host = host_tensor(k_w, DType::kF32, {head_dim});
  Tensor counts_host = host_ints(counts), store_host = host_ints(store_at), positions_host = host_ints(positions);
  const float eps = 1e-6f, theta = 1e6f;

  const QkNormRope cpu_norm{&q_norm_host, &k_norm_host, &positions_host, eps, {theta}};
  Tensor q_cpu = host_tensor(q, DType::kF32, {rows, q_heads, head_dim});
  Tensor k_cpu = host_tensor(k, DType::kF32, {rows, kv_heads, head_dim});
  Tensor out_cpu = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, head_dim});
  cpu_->store_and_attend(q_cpu, k_cpu, v_host, cpu_chunks, store_host, counts_host, out_cpu, &cpu_norm);

  Tensor q_norm = gpu_->upload_weight(q_norm_host), k_norm = gpu_->upload_weight(k_norm_host);
  Tensor positions_gpu = to_gpu(positions_host), store_gpu = to_gpu(store_host), counts_gpu = to_gpu(counts_host);
  Tensor v_gpu = to_gpu(v_host);
  const QkNormRope gpu_norm{&q_norm, &k_norm, &positions_gpu, eps, {theta}};
  Tensor q_fused = to_gpu(q_host), k_fused = to_gpu(k_host), out_fused = poisoned({rows, q_heads, head_dim});
  gpu_->store_and_attend(q_fused, k_fused, v_gpu, fused_chunks, store_gpu, counts_gpu, out_fused, &gpu_norm);

  Tensor q_apart = to_gpu(q_host), k_apart = to_gpu(k_host), out_apart = poisoned({rows, q_heads, head_dim});
  gpu_->head_norm_rope(q_apart, q_norm, eps, positions_gpu, theta);
  gpu_->head_norm_rope(k_apart, k_norm, eps, positions_gpu, theta);
  gpu_->store_and_attend(q_apart, k_apart, v_gpu, apart_chunks, store_gpu, counts_gpu, out_apart);

  const std::vector<float> out = download(out_fused);
  EXPECT_LT(normalized_error(out, host_values(out_cpu)), 1e-4);
  expect_same_bits(out, download(out_apart), "attention out");
  expect_same_bits(download(q_fused), download(q_apart), "q after the norm and RoPE");
  expect_same_bits(download(k_fused), download(k_apart), "k after the norm and RoPE");
  for (size_t i = 0; i < cpu_caches.size(); ++i) {
    const std::string what = "cache " + std::to_string(i / 2) + (i % 2 ? " values" : " keys");
    const std::vector<float> cache = download(fused_caches[i]);
    EXPECT_LT(normalized_error(cache, host_values(cpu_caches[i])), 1e-5) << what;
    expect_same_bits(cache, download(apart_caches[i]), what);
  }
}

// Without the q/k norm (a family that has none), the fused call only rotates q and k: against
// the CPU's rope-only call, and against rope, rope and store_and_attend without it on the GPU.
TEST_F(CudaFusedParity, StoreAndAttendWithoutNormIsRopeThenStoreAndAttend) {
  std::mt19937 rng(17);
  const int64_t q_heads = 8, kv_heads = 2, head_dim = 64, chunk_count = 5, n = 3, capacity = 16;
  std::vector<Tensor> cpu_caches, fused_caches, apart_caches;
  for (auto* caches : {&cpu_caches, &fused_caches, &apart_caches}) caches->reserve(2 * chunk_count);
  std::vector<CacheChunk> cpu_chunks, fused_chunks, apart_chunks;
  std::vector<int32_t> counts, store_at, positions;
  for (int64_t c = 0; c < chunk_count; ++c) {
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<float> old = random_floats(static_cast<size_t>(capacity * kv_heads * head_dim), rng);
      cpu_caches.push_back(host_tensor(old, DType::kF32, {capacity, kv_heads, head_dim}));
      fused_caches.push_back(to_gpu(cpu_caches.back()));
      apart_caches.push_back(to_gpu(cpu_caches.back()));
    }
    cpu_chunks.push_back({&cpu_caches[2 * c], &cpu_caches[2 * c + 1], c * n, n});
    fused_chunks.push_back({&fused_caches[2 * c], &fused_caches[2 * c + 1], c * n, n});
    apart_chunks.push_back({&apart_caches[2 * c], &apart_caches[2 * c + 1], c * n, n});
    for (int64_t i = 0; i < n; ++i) {
      store_at.push_back(static_cast<int32_t>(2 * c + i));
      positions.push_back(static_cast<int32_t>(2 * c + i + 3000 * c));
      counts.push_back(static_cast<int32_t>(2 * c + i + 1));
    }
  }
  const int64_t rows = chunk_count * n;
  std::vector<float> q = random_floats(static_cast<size_t>(rows * q_heads * head_dim), rng, 3.0f);
  std::vector<float> k = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng, 3.0f);
  std::vector<float> v = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng);
  Tensor v_host = host_tensor(v, DType::kF32, {rows, kv_heads, head_dim});
  Tensor counts_host = host_ints(counts), store_host = host_ints(store_at), positions_host = host_ints(positions);

  const QkNormRope cpu_rope{.positions = &positions_host, .rope = {.theta = 1e4f}};
  Tensor q_cpu = host_tensor(q, DType::kF32, {rows, q_heads, head_dim});
  Tensor k_cpu = host_tensor(k, DType::kF32, {rows, kv_heads, head_dim});
  Tensor out_cpu = Tensor::zeros_cpu(DType::kF32, {rows, q_heads, head_dim});
  cpu_->store_and_attend(q_cpu, k_cpu, v_host, cpu_chunks, store_host, counts_host, out_cpu, &cpu_rope);

  Tensor positions_gpu = to_gpu(positions_host), store_gpu = to_gpu(store_host), counts_gpu = to_gpu(counts_host);
  Tensor v_gpu = to_gpu(v_host);
  const QkNormRope gpu_rope{.positions = &positions_gpu, .rope = {.theta = 1e4f}};
  Tensor q_fused = to_gpu(host_tensor(q, DType::kF32, {rows, q_heads, head_dim}));
  Tensor k_fused = to_gpu(host_tensor(k, DType::kF32, {rows, kv_heads, head_dim}));
  Tensor out_fused = poisoned({rows, q_heads, head_dim});
  gpu_->store_and_attend(q_fused, k_fused, v_gpu, fused_chunks, store_gpu, counts_gpu, out_fused, &gpu_rope);

  Tensor q_apart = to_gpu(host_tensor(q, DType::kF32, {rows, q_heads, head_dim}));
  Tensor k_apart = to_gpu(host_tensor(k, DType::kF32, {rows, kv_heads, head_dim}));
  Tensor out_apart = poisoned({rows, q_heads, head_dim});
  gpu_->rope(q_apart, positions_gpu, 1e4f);
  gpu_->rope(k_apart, positions_gpu, 1e4f);
  gpu_->store_and_attend(q_apart, k_apart, v_gpu, apart_chunks, store_gpu, counts_gpu, out_apart);

  const std::vector<float> out = download(out_fused);
  EXPECT_LT(normalized_error(out, host_values(out_cpu)), 1e-4);
  EXPECT_LT(normalized_error(out, download(out_apart)), 1e-5);
  EXPECT_LT(normalized_error(download(q_fused), host_values(q_cpu)), 1e-5) << "q after RoPE";
  EXPECT_LT(normalized_error(download(k_fused), download(k_apart)), 1e-5) << "k after RoPE";
  for (size_t i = 0; i < cpu_caches.size(); ++i) {
    const std::string what = "cache " + std::to_string(i / 2) + (i % 2 ? " values" : " keys");
    EXPECT_LT(normalized_error(download(fused_caches[i]), host_values(cpu_caches[i])), 1e-5) << what;
  }
}

// store_kv of many sequences (more than one launch's chunks), with and without k's norm and
// RoPE: every cache and k against the CPU, and bit for bit against head_norm_rope and store_rows.
TEST_F(CudaFusedParity, StoreKvIsHeadNormRopeThenStoreRows) {
  std::mt19937 rng(16);
  const int64_t kv_heads = 2, head_dim = 64, chunk_count = 70;
  for (bool with_norm : {true, false}) {
    std::vector<Tensor> cpu_caches, fused_caches, apart_caches;
    for (auto* caches : {&cpu_caches, &fused_caches, &apart_caches}) caches->reserve(2 * chunk_count);
    std::vector<CacheChunk> cpu_chunks, fused_chunks;
    std::vector<int32_t> store_at, positions;
    int64_t rows = 0;
    for (int64_t c = 0; c < chunk_count; ++c) {
      const int64_t n = 1 + c % 3, start = (c * 13) % 50, capacity = start + n + 2;
      for (int kv = 0; kv < 2; ++kv) {
        std::vector<float> old = random_floats(static_cast<size_t>(capacity * kv_heads * head_dim), rng);
        cpu_caches.push_back(host_tensor(old, DType::kF32, {capacity, kv_heads, head_dim}));
        fused_caches.push_back(to_gpu(cpu_caches.back()));
        apart_caches.push_back(to_gpu(cpu_caches.back()));
      }
      cpu_chunks.push_back({&cpu_caches[2 * c], &cpu_caches[2 * c + 1], rows, n});
      fused_chunks.push_back({&fused_caches[2 * c], &fused_caches[2 * c + 1], rows, n});
      for (int64_t i = 0; i < n; ++i) {
        store_at.push_back(static_cast<int32_t>(start + i));
        positions.push_back(static_cast<int32_t>(start + i + 1000 * c));
      }
      rows += n;
    }
    std::vector<float> k = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng, 3.0f);
    std::vector<float> v = random_floats(static_cast<size_t>(rows * kv_heads * head_dim), rng);
    std::vector<float> k_w = random_floats(static_cast<size_t>(head_dim), rng);
    Tensor k_host = host_tensor(k, DType::kF32, {rows, kv_heads, head_dim});
    Tensor v_host = host_tensor(v, DType::kF32, {rows, kv_heads, head_dim});
    Tensor k_norm_host = host_tensor(k_w, DType::kBF16, {head_dim});
    Tensor store_host = host_ints(store_at), positions_host = host_ints(positions);
    const QkNormRope cpu_norm{.k_norm = &k_norm_host, .positions = &positions_host, .eps = 1e-6f, .rope = {1e6f}};
    cpu_->store_kv(k_host, v_host, cpu_chunks, store_host, with_norm ? &cpu_norm : nullptr);

    Tensor k_norm = gpu_->upload_weight(k_norm_host);
    Tensor positions_gpu = to_gpu(positions_host), store_gpu = to_gpu(store_host), v_gpu = to_gpu(v_host);
    const QkNormRope gpu_norm{.k_norm = &k_norm, .positions = &positions_gpu, .eps = 1e-6f, .rope = {1e6f}};
    Tensor k_fused = to_gpu(host_tensor(k, DType::kF32, {rows, kv_heads, head_dim}));
    gpu_->store_kv(k_fused, v_gpu, fused_chunks, store_gpu, with_norm ? &gpu_norm : nullptr);

    Tensor k_apart = to_gpu(host_tensor(k, DType::kF32, {rows, kv_heads, head_dim}));
    if (with_norm) gpu_->head_norm_rope(k_apart, k_norm, 1e-6f, positions_gpu, 1e6f);
    for (int64_t c = 0; c < chunk_count; ++c) {
      const CacheChunk& chunk = fused_chunks[static_cast<size_t>(c)];
      Tensor rows_at = store_gpu.slice_rows(chunk.first_row, chunk.rows);
      gpu_->store_rows(k_apart.slice_rows(chunk.first_row, chunk.rows), apart_caches[2 * c], rows_at);
      gpu_->store_rows(v_gpu.slice_rows(chunk.first_row, chunk.rows), apart_caches[2 * c + 1], rows_at);
    }

    const std::string how = with_norm ? "with the norm" : "without the norm";
    const std::vector<float> k_after = download(k_fused);
    EXPECT_LT(normalized_error(k_after, host_values(k_host)), 1e-5) << "k " << how;
    expect_same_bits(k_after, download(k_apart), "k " + how);
    for (size_t i = 0; i < cpu_caches.size(); ++i) {
      const std::string what = "cache " + std::to_string(i / 2) + (i % 2 ? " values " : " keys ") + how;
      const std::vector<float> cache = download(fused_caches[i]);
      EXPECT_LT(normalized_error(cache, host_values(cpu_caches[i])), 1e-5) << what;
      expect_same_bits(cache, download(apart_caches[i]), what);
    }
  }
}

// A row stored outside its cache is found on the device and fails the next copy to the host, as
// without the norm; the norm's inputs are checked at the call.
TEST_F(CudaFusedParity, StoreAndAttendWithNormRopeRefusesRowsOutsideTheCacheAndMissingInputs) {
  Tensor q = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor k = gpu_->allocate(DType::kF32, {4, 2, 16}), v = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor keys = gpu_->allocate(DType::kF32, {8, 2, 16}), values = gpu_->allocate(DType::kF32, {8, 2, 16});
  Tensor counts = to_gpu(host_ints({1, 2, 3, 4}));
  Tensor positions = to_gpu(host_ints({5, 6, 7, 8}));
  Tensor out = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor norm = gpu_->upload_weight(Tensor::zeros_cpu(DType::kBF16, {16}));
  const CacheChunk whole[] = {{&keys, &values, 0, 4}};
  const QkNormRope no_positions{&norm, &norm, nullptr, 1e-6f, {1e6f}};
  EXPECT_THROW(gpu_->store_and_attend(q, k, v, whole, positions, counts, out, &no_positions), Error);
  Tensor wide_norm = gpu_->upload_weight(Tensor::zeros_cpu(DType::kBF16, {32}));
  const QkNormRope wrong_width{&wide_norm, &norm, &positions, 1e-6f, {1e6f}};
  EXPECT_THROW(gpu_->store_and_attend(q, k, v, whole, positions, counts, out, &wrong_width), Error);

  const QkNormRope norm_rope{&norm, &norm, &positions, 1e-6f, {1e6f}};
  gpu_->store_and_attend(q, k, v, whole, positions, counts, out, &norm_rope);  // row 8 is past the cache
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  EXPECT_THROW(gpu_->copy_to_host(out, sink.data()), Error);
  gpu_->copy_to_host(out, sink.data());
}

}  // namespace
}  // namespace flashq
