// Sampling on the backend in the engine (EngineOptions::sample_on_backend, the GPU default): a
// batch of seeded sampling, greedy and speculative sequences gives the tokens of host sampling,
// the backend samples every pass whose sampling sequences draft nothing, and a pass with a
// speculative sampling sequence still takes the logits to the host.
#include <gtest/gtest.h>

#include <map>

#include "tests/engine/dflash_test_pair.h"

namespace flashq::testing {
namespace {

// The CPU backend, counting what the engine asks of it.
class CountingBackend final : public Backend {
 public:
  Device device() const override { return inner_->device(); }
  std::string name() const override { return inner_->name(); }
  Tensor allocate(DType dtype, Shape shape) override { return inner_->allocate(dtype, std::move(shape)); }
  Tensor upload_weight(const Tensor& host) override { return inner_->upload_weight(host); }
  void copy_to_host(const Tensor& src, void* dst) override {
    if (src.dtype() == DType::kF32) float_rows_to_host += src.rows();
    inner_->copy_to_host(src, dst);
  }
  void copy_from_host(const void* src, Tensor& dst) override { inner_->copy_from_host(src, dst); }
  void copy_rows(const Tensor& src, Tensor& dst, int64_t first_row) override { inner_->copy_rows(src, dst, first_row); }
  void store_rows(const Tensor& src, Tensor& dst, const Tensor& rows) override { inner_->store_rows(src, dst, rows); }
  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) override { inner_->gather_rows(src, rows, dst); }
  void copy_columns(const Tensor& src, Tensor& dst, int64_t first_col) override {
    inner_->copy_columns(src, dst, first_col);
  }
  void matmul(const Tensor& x, const Tensor& w, Tensor& y) override { inner_->matmul(x, w, y); }
  void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& y) override { inner_->rmsnorm(x, w, eps, y); }
  void add_rmsnorm(Tensor& h, const Tensor& delta, const Tensor& w, float eps, Tensor& y) override {
    inner_->add_rmsnorm(h, delta, w, eps, y);
  }
  void add(Tensor& h, const Tensor& delta) override { inner_->add(h, delta); }
  void rope(Tensor& x, const Tensor& positions, const RopeOptions& rope) override { inner_->rope(x, positions, rope); }
  void head_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                      const RopeOptions& rope) override {
    inner_->head_norm_rope(x, w, eps, positions, rope);
  }
  void add_bias(Tensor& y, const Tensor& bias) override { inner_->add_bias(y, bias); }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_counts, Tensor& out,
                 const AttentionOptions& options) override {
    inner_->attention(q, k, v, key_counts, out, options);
  }
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override { inner_->swiglu(gate, up, out); }
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override { inner_->embedding(table, ids, out); }
  void argmax(const Tensor& logits, Tensor& ids) override { inner_->argmax(logits, ids); }
  void sample(const Tensor& logits, const Tensor& params, Tensor& ids) override {
    sampled_rows += logits.rows();
    inner_->sample(logits, params, ids);
  }
  void matmul_mxfp4(const Tensor& x, const Tensor& blocks, const Tensor& scales, Tensor& y) override {
    inner_->matmul_mxfp4(x, blocks, scales, y);
  }
  void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& ids, Tensor& weights) override {
    inner_->moe_route(logits, routing, ids, weights);
  }
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, std::span<const ExpertWeights> experts,
                   const ExpertActivation& activation, Tensor& out) override {
    inner_->moe_experts(x, ids, weights, experts, activation, out);
  }
  void delta_rule_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor& g,
                        Tensor& beta) override {
    inner_->delta_rule_gates(a, b, a_log, dt_bias, g, beta);
  }
  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) override {
    inner_->gated_rmsnorm(x, z, w, eps, out);
  }
  void sigmoid_gate(Tensor& x, const Tensor& gate) override { inner_->sigmoid_gate(x, gate); }
  void grouped_dynamic_conv(const Tensor& x, const Tensor& dynamic, const Tensor& base, const Tensor& row_in_block,
                            int64_t group_size, Tensor& out) override {
    inner_->grouped_dynamic_conv(x, dynamic, base, row_in_block, group_size, out);
  }
  void top_k(const Tensor& logits, Tensor& values, Tensor& ids) override { inner_->top_k(logits, values, ids); }
  void selector_pair_scores(const Tensor& a, const Tensor& h, const Tensor& b, Tensor& out) override {
    inner_->selector_pair_scores(a, h, b, out);
  }
  void causal_conv1d(const Tensor& x, const Tensor& weight, std::span<const StateChunk> chunks, Tensor& out) override {
    inner_->causal_conv1d(x, weight, chunks, out);
  }
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        std::span<const StateChunk> chunks, Tensor& out) override {
    inner_->gated_delta_rule(q, k, v, g, beta, chunks, out);
  }
  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                std::span<const StateChunk> chunks, Tensor& out) override {
    inner_->gated_delta_rule_chunked(q, k, v, g, beta, chunks, out);
  }
  int64_t delta_rule_chunk_rows() const override { return inner_->delta_rule_chunk_rows(); }
  bool prefers_chunked_delta_rule() const override { return inner_->prefers_chunked_delta_rule(); }

  int64_t sampled_rows = 0;
  int64_t float_rows_to_host = 0;  // logits (and any other float rows) copied out

 private:
  std::unique_ptr<Backend> inner_ = make_cpu_backend();
};

SequenceRequest request(uint32_t prompt_seed, SpecMode spec, int64_t block, float temperature, uint64_t seed) {
  SequenceRequest r;
  r.generation.prompt_tokens = some_tokens(7, 459, prompt_seed);
  r.generation.max_tokens = 24;
  r.generation.ignore_eos = true;
  r.generation.sampling = {.temperature = temperature,
                           .top_k = temperature > 0 ? 40 : 0,
                           .top_p = temperature > 0 ? 0.9f : 1.0f,
                           .seed = seed};
  r.spec = spec;
  r.block_size = block;
  return r;
}

struct EngineRun {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  int64_t sampled_rows = 0, float_rows_to_host = 0;
};

EngineRun run_batch(const std::vector<SequenceRequest>& requests, bool sample_on_backend) {
  TempDir target_dir, drafter_dir;
  write_tiny_model(f32_target(51), target_dir.path());
  CountingBackend backend;
  std::unique_ptr<TargetModel> model = load_target_model(target_dir.path(), backend);
  write_tiny_drafter({.layers = 1, .block_size = 8, .seed = 52}, target_dir.path(), drafter_dir.path());
  std::unique_ptr<DFlashDrafter> drafter = DFlashDrafter::load(drafter_dir.path(), *model, backend);
  DFlashProposer proposer(*drafter);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(target_dir.path());
  Engine engine(*model, &proposer,
                {.max_slots = static_cast<int64_t>(requests.size()), .sample_on_backend = sample_on_backend});
  for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
  engine.run_until_idle();
  EngineRun out;
  for (FinishedSequence& done : engine.take_finished()) out.tokens[done.id] = std::move(done.tokens);
  out.sampled_rows = backend.sampled_rows;
  out.float_rows_to_host = backend.float_rows_to_host;
  return out;
}

TEST(BackendSamplingInTheEngine, GivesTheTokensOfHostSamplingWithOnlyIdsLeavingTheBackend) {
  const std::vector<SequenceRequest> requests = {request(1, SpecMode::kOff, 0, 0.8f, 5),
                                                 request(2, SpecMode::kOff, 0, 1.3f, 6),
                                                 request(3, SpecMode::kDflash, 4, 0.0f, 0)};
  const EngineRun on_host = run_batch(requests, false);
  const EngineRun on_backend = run_batch(requests, true);
  EXPECT_EQ(on_backend.tokens, on_host.tokens);
  EXPECT_EQ(on_host.sampled_rows, 0);
  EXPECT_GE(on_backend.sampled_rows, 2 * 24) << "every pass of the sampling sequences, on the backend";
  EXPECT_EQ(on_backend.float_rows_to_host, 0) << "logits reached the host";
  EXPECT_GT(on_host.float_rows_to_host, 0);
}

TEST(BackendSamplingInTheEngine, ASpeculativeSamplingSequenceStillGetsItsDistributionsOnTheHost) {
  const std::vector<SequenceRequest> requests = {request(4, SpecMode::kOff, 0, 0.8f, 7),
                                                 request(5, SpecMode::kDflash, 4, 0.9f, 8)};
  const EngineRun on_host = run_batch(requests, false);
  const EngineRun on_backend = run_batch(requests, true);
  EXPECT_EQ(on_backend.tokens, on_host.tokens);
  EXPECT_GT(on_backend.float_rows_to_host, 0) << "speculative sampling needs the draft rows' distributions";
}

}  // namespace
}  // namespace flashq::testing
