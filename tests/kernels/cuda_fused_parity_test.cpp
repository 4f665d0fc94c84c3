// What the CUDA backend's fused ops must do beyond the op table (backend_ops_test holds
// matmul_many, matmul_swiglu, store_and_attend and store_kv on the GPU to the reference, the CPU
// and, bit for bit, the ops they fuse): refusals at the call and on the device, and an MLP row
// that does not depend on the rows beside it.
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
