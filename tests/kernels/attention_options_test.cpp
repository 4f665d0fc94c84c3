// Attention's gpt-oss options (AttentionOptions, kernels/backend.h) beyond the op table's
// numbers: what every backend refuses (sinks of the wrong size or dtype, a negative window, a
// cache smaller than the window), that a window still reports a key count beyond the keys only
// when there is none, and on the CPU that the options cost the default path nothing: a sink of
// -infinity and a window covering every key give the bits of plain attention. The CUDA runs skip
// where no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "tests/kernels/op_harness.h"

namespace flashq {
namespace {

enum class Which { kCpu, kCuda };

class AttentionOptionsTest : public ::testing::TestWithParam<Which> {
 protected:
  void SetUp() override {
    if (GetParam() == Which::kCuda) {
      if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
      backend_ = make_backend("cuda");
    } else {
      backend_ = make_cpu_backend();
    }
    device_ = std::make_unique<OpDevice>(*backend_);
    std::mt19937 rng(7);
    q_ = device_->upload(random_floats(4 * 8 * 16, rng), {4, 8, 16});
    k_ = device_->upload(random_floats(10 * 2 * 16, rng), {10, 2, 16});
    v_ = device_->upload(random_floats(10 * 2 * 16, rng), {10, 2, 16});
    counts_ = device_->ints({10, 3, 0, 7});
    out_ = device_->poisoned({4, 8, 16});
  }

  // The message of the Error that attention with `options` throws, or "" when it throws none.
  std::string refusal(const AttentionOptions& options) {
    try {
      backend_->attention(q_, k_, v_, counts_, out_, options);
      device_->synchronize();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<OpDevice> device_;
  Tensor q_, k_, v_, counts_, out_;
};

TEST_P(AttentionOptionsTest, RefusesSinksOfTheWrongSizeOrDtype) {
  Tensor seven = device_->weight(std::vector<float>(7, 0.5f), DType::kF32, {7});
  EXPECT_NE(refusal({.sinks = &seven}).find("one logit per query head (8)"), std::string::npos);
  Tensor two_d = device_->weight(std::vector<float>(8, 0.5f), DType::kF32, {2, 4});
  EXPECT_NE(refusal({.sinks = &two_d}).find("one logit per query head"), std::string::npos);
  Tensor half = device_->weight(std::vector<float>(8, 0.5f), DType::kF16, {8});
  EXPECT_NE(refusal({.sinks = &half}).find("f32 or bf16"), std::string::npos);
  Tensor ints = device_->ints(std::vector<int32_t>(8, 1));
  EXPECT_NE(refusal({.sinks = &ints}).find("f32 or bf16"), std::string::npos);
  Tensor right = device_->weight(std::vector<float>(8, 0.5f), DType::kBF16, {8});
  EXPECT_EQ(refusal({.sinks = &right}), "");
}

TEST_P(AttentionOptionsTest, RefusesANegativeWindowAndACacheSmallerThanTheWindow) {
  EXPECT_NE(refusal({.sliding_window = -1}).find("sliding window of -1"), std::string::npos);
  EXPECT_NE(refusal({.sliding_window = 11}).find("a cache of 10 rows cannot hold a sliding window of 11"),
            std::string::npos);
  EXPECT_EQ(refusal({.sliding_window = 10}), "");
}

TEST_P(AttentionOptionsTest, StoreAndAttendRefusesARingSmallerThanTheWindow) {
  Tensor k = device_->upload(std::vector<float>(4 * 2 * 16, 0.1f), {4, 2, 16});
  Tensor v = device_->upload(std::vector<float>(4 * 2 * 16, 0.2f), {4, 2, 16});
  Tensor keys = backend_->allocate(DType::kF32, {5, 2, 16}), values = backend_->allocate(DType::kF32, {5, 2, 16});
  const CacheChunk chunk{&keys, &values, 0, 4};
  Tensor store_at = device_->ints({0, 1, 2, 3});
  try {
    backend_->store_and_attend(q_, k, v, {&chunk, 1}, store_at, counts_, out_, nullptr, {.sliding_window = 6});
    ADD_FAILURE() << "a ring of 5 rows was taken for a window of 6";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold a sliding window of 6"), std::string::npos) << e.what();
  }
}

TEST_P(AttentionOptionsTest, KeyCountsBeyondTheKeysAreAnErrorOnlyWithoutAWindow) {
  counts_ = device_->ints({10, 11, 0, 7});
  EXPECT_NE(refusal({}).find("key count"), std::string::npos);
  EXPECT_EQ(refusal({.sliding_window = 4}), "");  // a ring: position 10 is row 0
  const std::vector<float> out = device_->read(out_);
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
}

INSTANTIATE_TEST_SUITE_P(Backends, AttentionOptionsTest, ::testing::Values(Which::kCpu, Which::kCuda),
                         [](const ::testing::TestParamInfo<Which>& p) {
                           return std::string(p.param == Which::kCpu ? "Cpu" : "Cuda");
                         });

// The CPU's options path is its default path with a different start: a sink of -infinity adds
// exp(-inf) = 0 to every total, and a window covering every key reads the keys from 0, unwrapped.
TEST(CpuAttentionOptions, InertOptionsGiveTheBitsOfPlainAttention) {
  auto backend = make_cpu_backend();
  OpDevice device(*backend);
  std::mt19937 rng(3);
  const int64_t rows = 9, q_heads = 8, kv_heads = 2, head_dim = 64, keys = 200;
  Tensor q = device.upload(random_floats(rows * q_heads * head_dim, rng), {rows, q_heads, head_dim});
  Tensor k = device.upload(random_floats(keys * kv_heads * head_dim, rng), {keys, kv_heads, head_dim});
  Tensor v = device.upload(random_floats(keys * kv_heads * head_dim, rng), {keys, kv_heads, head_dim});
  Tensor counts = device.ints({200, 0, 1, 63, 64, 65, 129, 7, 150});
  Tensor plain = device.poisoned({rows, q_heads, head_dim}), with_options = device.poisoned({rows, q_heads, head_dim});
  backend->attention(q, k, v, counts, plain);
  Tensor no_sink =
      device.weight(std::vector<float>(q_heads, -std::numeric_limits<float>::infinity()), DType::kF32, {q_heads});
  backend->attention(q, k, v, counts, with_options, {.sinks = &no_sink, .sliding_window = keys});
  const std::vector<float> a = device.read(plain), b = device.read(with_options);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "element " << i;
}

}  // namespace
}  // namespace flashq
