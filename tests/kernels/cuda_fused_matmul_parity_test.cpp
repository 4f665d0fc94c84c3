// The CUDA backend's fused products against the CPU backend and against its own unfused ops:
// matmul_many (several weights of one x in one launch) and matmul_swiglu (the MLP's gate and
// up products with SwiGLU in one launch). Where the tensor-core kernel for few rows takes them,
// each output must have the very bits of the unfused ops, so fusing changes no token; elsewhere
// (many rows, f32 weights, K not a multiple of 32) they fall back to those ops.
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

class CudaFusedMatmulParity : public CudaParity {
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
TEST_F(CudaFusedMatmulParity, MatmulManyMatchesCpuAndEachProductAlone) {
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

TEST_F(CudaFusedMatmulParity, MatmulManyRefusesAProductWithoutOutputOrOfTheWrongShape) {
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
TEST_F(CudaFusedMatmulParity, MatmulSwigluMatchesCpuAndTheThreeOps) {
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
TEST_F(CudaFusedMatmulParity, MatmulSwigluRowDoesNotDependOnTheOtherRowsUpTo128Rows) {
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

}  // namespace
}  // namespace flashq
