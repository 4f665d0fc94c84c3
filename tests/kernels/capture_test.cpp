// Backend::capture and replay on the CPU backend, the twin of CUDA graphs: ops recorded, not
// run; a replay runs them on the tensors' current contents; allocation and host transfers are
// refused while recording; checks of what tensors hold happen at replay.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "shared/error.h"

namespace flashq {
namespace {

class CaptureTest : public ::testing::Test {
 protected:
  static constexpr int64_t kVocab = 50, kHidden = 16;

  void SetUp() override {
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    table_ = backend_->allocate(DType::kF32, {kVocab, kHidden});
    norm_ = backend_->allocate(DType::kF32, {kHidden});
    head_ = backend_->allocate(DType::kF32, {kVocab, kHidden});
    for (Tensor* t : {&table_, &norm_, &head_}) {
      std::vector<float> values(static_cast<size_t>(t->numel()));
      for (float& v : values) v = dist(rng);
      backend_->copy_from_host(values.data(), *t);
    }
    ids_ = backend_->allocate(DType::kI32, {3});
    hidden_ = backend_->allocate(DType::kF32, {3, kHidden});
    logits_ = backend_->allocate(DType::kF32, {3, kVocab});
    next_ = backend_->allocate(DType::kI32, {3});
  }

  // A tiny pass: embed, normalise, project onto the vocabulary, pick the largest.
  void pass() {
    backend_->embedding(table_, ids_, hidden_);
    backend_->rmsnorm(hidden_, norm_, 1e-6f, hidden_);
    backend_->matmul(hidden_, head_, logits_);
    backend_->argmax(logits_, next_);
  }

  std::vector<int32_t> upload_and_run_directly(const std::vector<int32_t>& ids) {
    backend_->copy_from_host(ids.data(), ids_);
    pass();
    return read_next();
  }

  std::vector<int32_t> read_next() {
    std::vector<int32_t> next(3);
    backend_->copy_to_host(next_, next.data());
    return next;
  }

  std::unique_ptr<Backend> backend_ = make_cpu_backend();
  Tensor table_, norm_, head_, ids_, hidden_, logits_, next_;
};

TEST_F(CaptureTest, ReplayRunsTheRecordedOpsOnWhatTheTensorsHoldThen) {
  const std::vector<int32_t> first = {1, 7, 42}, second = {3, 3, 49};
  const std::vector<int32_t> want_first = upload_and_run_directly(first);
  const std::vector<int32_t> want_second = upload_and_run_directly(second);

  const std::vector<int32_t> marker = {-1, -1, -1};
  backend_->copy_from_host(marker.data(), next_);
  std::unique_ptr<CapturedOps> ops = backend_->capture([&] { pass(); });
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(read_next(), marker) << "capturing ran the ops";

  backend_->copy_from_host(first.data(), ids_);
  backend_->replay(*ops);
  EXPECT_EQ(read_next(), want_first);
  backend_->copy_from_host(second.data(), ids_);
  backend_->replay(*ops);
  EXPECT_EQ(read_next(), want_second);
}

TEST_F(CaptureTest, AllocationAndHostTransfersAreRefusedWhileRecording) {
  std::vector<int32_t> host(3, 0);
  EXPECT_THROW(backend_->capture([&] { backend_->copy_from_host(host.data(), ids_); }), Error);
  EXPECT_THROW(backend_->capture([&] { backend_->copy_to_host(next_, host.data()); }), Error);
  EXPECT_THROW(backend_->capture([&] { backend_->allocate(DType::kF32, {2}); }), Error);
  EXPECT_THROW(backend_->capture([&] { backend_->capture([] {}); }), Error);
  // A failed capture leaves the backend running ops directly.
  EXPECT_EQ(upload_and_run_directly({1, 2, 3}).size(), 3u);
}

TEST_F(CaptureTest, TokenIdsAreCheckedWhenTheReplayRunsNotWhenRecorded) {
  const std::vector<int32_t> good = {1, 2, 3}, bad = {1, kVocab, 3};
  backend_->copy_from_host(good.data(), ids_);
  std::unique_ptr<CapturedOps> ops = backend_->capture([&] { pass(); });
  backend_->copy_from_host(bad.data(), ids_);
  try {
    backend_->replay(*ops);
    FAIL() << "an id outside the table was not refused at replay";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
  backend_->copy_from_host(good.data(), ids_);
  backend_->replay(*ops);
  EXPECT_EQ(read_next(), upload_and_run_directly(good));
}

// A captured store_and_attend reads where to store and how many keys to attend when it runs,
// so one captured step serves the next steps as the cache fills.
TEST_F(CaptureTest, StoreAndAttendReadsItsRowsAndCountsWhenReplayed) {
  const int64_t heads = 2, dim = 4;
  Tensor q = backend_->allocate(DType::kF32, {1, heads, dim});
  Tensor k = backend_->allocate(DType::kF32, {1, heads, dim});
  Tensor cache = backend_->allocate(DType::kF32, {4, heads, dim});
  Tensor store_at = backend_->allocate(DType::kI32, {1});
  Tensor counts = backend_->allocate(DType::kI32, {1});
  Tensor out = backend_->allocate(DType::kF32, {1, heads, dim});
  const CacheChunk chunk[] = {{&cache, &cache, 0, 1}};
  std::unique_ptr<CapturedOps> ops =
      backend_->capture([&] { backend_->store_and_attend(q, k, k, chunk, store_at, counts, out); });
  std::vector<float> stored(static_cast<size_t>(cache.numel()));
  for (int32_t step = 0; step < 4; ++step) {
    const std::vector<float> row(static_cast<size_t>(heads * dim), 1.0f + static_cast<float>(step));
    backend_->copy_from_host(row.data(), k);
    const std::vector<int32_t> at = {step}, count = {step + 1};
    backend_->copy_from_host(at.data(), store_at);
    backend_->copy_from_host(count.data(), counts);
    backend_->replay(*ops);
  }
  backend_->copy_to_host(cache, stored.data());
  for (int64_t row = 0; row < 4; ++row) {
    EXPECT_EQ(stored[row * heads * dim], 1.0f + static_cast<float>(row)) << "cache row " << row;
  }
  const std::vector<int32_t> outside = {4};
  backend_->copy_from_host(outside.data(), store_at);
  EXPECT_THROW(backend_->replay(*ops), Error);
}

TEST(CaptureDefault, ABackendThatCannotRecordSaysSo) {
  class Plain final : public Backend {
   public:
    Device device() const override { return Device::kCpu; }
    std::string name() const override { return "plain"; }
    Tensor allocate(DType dtype, Shape shape) override { return Tensor::zeros_cpu(dtype, std::move(shape)); }
    Tensor upload_weight(const Tensor& host) override { return host; }
    void copy_to_host(const Tensor&, void*) override {}
    void copy_from_host(const void*, Tensor&) override {}
    void copy_rows(const Tensor&, Tensor&, int64_t) override {}
    void store_rows(const Tensor&, Tensor&, const Tensor&) override {}
    void gather_rows(const Tensor&, const Tensor&, Tensor&) override {}
    void copy_columns(const Tensor&, Tensor&, int64_t) override {}
    void matmul(const Tensor&, const Tensor&, Tensor&) override {}
    void rmsnorm(const Tensor&, const Tensor&, float, Tensor&) override {}
    void add_rmsnorm(Tensor&, const Tensor&, const Tensor&, float, Tensor&) override {}
    void add(Tensor&, const Tensor&) override {}
    void rope(Tensor&, const Tensor&, const RopeOptions&) override {}
    void head_norm_rope(Tensor&, const Tensor&, float, const Tensor&, const RopeOptions&) override {}
    void add_bias(Tensor&, const Tensor&) override {}
    void attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                   const AttentionOptions&) override {}
    void swiglu(const Tensor&, const Tensor&, Tensor&) override {}
    void embedding(const Tensor&, const Tensor&, Tensor&) override {}
    void argmax(const Tensor&, Tensor&) override {}
    void sample(const Tensor&, const Tensor&, Tensor&) override {}
    void matmul_mxfp4(const Tensor&, const Tensor&, const Tensor&, Tensor&) override {}
    void moe_route(const Tensor&, const MoeRouting&, Tensor&, Tensor&) override {}
    void moe_experts(const Tensor&, const Tensor&, const Tensor&, std::span<const ExpertWeights>,
                     const ExpertActivation&, Tensor&) override {}
    void delta_rule_gates(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&) override {}
    void gated_rmsnorm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) override {}
    void sigmoid_gate(Tensor&, const Tensor&) override {}
    void causal_conv1d(const Tensor&, const Tensor&, std::span<const StateChunk>, Tensor&) override {}
    void grouped_dynamic_conv(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, Tensor&) override {}
    void top_k(const Tensor&, Tensor&, Tensor&) override {}
    void selector_pair_scores(const Tensor&, const Tensor&, const Tensor&, Tensor&) override {}
    void gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          std::span<const StateChunk>, Tensor&) override {}
    void gated_delta_rule_chunked(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  std::span<const StateChunk>, Tensor&) override {}
    int64_t delta_rule_chunk_rows() const override { return 1; }
    bool prefers_chunked_delta_rule() const override { return false; }
  } plain;
  try {
    plain.capture([] {});
    FAIL() << "capture did not refuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
  }
}

}  // namespace
}  // namespace flashq
