// The shape, dtype and device checks of the Backend ops, one definition for every backend: an
// op given tensors that do not fit is refused the same way on the CPU and on a GPU, before
// anything runs. What only the running op can see (token ids, key counts and row indices held
// in device tensors) is checked by each backend when the op runs.
//
// Checks run on every op of the decode loop, so a message is built only when one fails: a
// literal as it is, anything composed from a callable.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string>

#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace flashq {

class OpChecks {
 public:
  // `backend` names the backend in messages ("cpu" gives "cpu backend: ..."); every tensor an
  // op reads or writes must be on `device`.
  constexpr OpChecks(Device device, const char* backend) : device_(device), backend_(backend) {}

  // Throws Error(kInternal, "<backend> backend: <what>").
  [[noreturn]] void fail(const std::string& what) const;
  void require(bool ok, const char* what) const {
    if (!ok) fail(what);
  }
  template <std::invocable MakeMessage>
  void require(bool ok, MakeMessage&& make_message) const {
    if (!ok) fail(make_message());
  }

  void on_device(const Tensor& t, const char* name) const;
  // On the device and float32.
  void f32(const Tensor& t, const char* name) const;
  // On the device and a KV cache's element type: float32 or bf16 (worker/model/kv_cache_dtype.h).
  void kv_cache(const Tensor& t, const char* name) const;

  void copy_rows(const Tensor& src, const Tensor& dst, int64_t first_row) const;
  void copy_columns(const Tensor& src, const Tensor& dst, int64_t first_col) const;
  // dst[i] = src[rows[i]] and dst[rows[i]] = src[i]: float32 rows of one size, an int32 index
  // per row of dst (gather) or src (store). A store's dst may be a bf16 cache (rounded as stored).
  void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) const;
  void store_rows(const Tensor& src, const Tensor& dst, const Tensor& rows) const;
  // x and y float32, w f32, f16 or bf16 of [N, K]: y[M, N] = x[M, K] * w^T.
  void matmul(const Tensor& x, const Tensor& w, const Tensor& y) const;
  // Every product has a weight and an output, each a matmul of x.
  void matmul_many(const Tensor& x, std::span<const WeightProduct> products) const;
  void rmsnorm(const Tensor& x, const Tensor& w, const Tensor& y) const;
  void add_rmsnorm(const Tensor& h, const Tensor& delta, const Tensor& w, const Tensor& y) const;
  void add(const Tensor& h, const Tensor& delta) const;
  // y [M, N] float32, bias [N] f32, f16 or bf16.
  void add_bias(const Tensor& y, const Tensor& bias) const;
  void rope(const Tensor& x, const Tensor& positions) const;
  void head_norm_rope(const Tensor& x, const Tensor& w, const Tensor& positions) const;
  // q [M, Hq, D] and out of its shape, float32; an int32 key count per row.
  void attention_queries(const Tensor& q, const Tensor& key_counts, const Tensor& out) const;
  // attention_queries, and k, v [T, Hkv, D] float32 with Hkv dividing Hq.
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_counts, const Tensor& out) const;
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) const;
  void embedding(const Tensor& table, const Tensor& ids, const Tensor& out) const;
  void argmax(const Tensor& logits, const Tensor& ids) const;
  void sample(const Tensor& logits, const Tensor& params, const Tensor& ids) const;

  // ---- mixture of experts and MXFP4 weights (kernels/op_checks_moe.cpp) ----
  // x [M, K] and y [M, N] float32, blocks u8 [N, K / 2], scales u8 [N, K / 32], K a multiple of 32.
  void matmul_mxfp4(const Tensor& x, const Tensor& blocks, const Tensor& scales, const Tensor& y) const;
  // A dense weight [out, in] or MXFP4 blocks and scales, and a bias of [out] when it has one;
  // `name` names it in messages.
  void linear_weight(const LinearWeight& w, const std::string& name) const;
  // linear_weight, x [M, in] and y [M, out] float32.
  void linear(const Tensor& x, const LinearWeight& w, const Tensor& y) const;
  // logits [M, E] float32, top_k in [1, E], expert_ids [M, k] int32, expert_weights [M, k]
  // float32, normalize_top_k only with kSoftmaxThenTopK.
  // Backend::delta_rule_gates, gated_rmsnorm and sigmoid_gate's tensors.
  void delta_rule_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                        const Tensor& beta) const;
  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, const Tensor& out) const;
  void sigmoid_gate(const Tensor& x, const Tensor& gate) const;
  // Backend::causal_conv1d's tensors and chunks.
  void causal_conv1d(const Tensor& x, const Tensor& weight, std::span<const StateChunk> chunks,
                     const Tensor& out) const;
  // Backend::gated_delta_rule's tensors and chunks.
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        std::span<const StateChunk> chunks, const Tensor& out) const;
  // DFlash2's ops (Backend::grouped_dynamic_conv, top_k, selector_pair_scores).
  void grouped_dynamic_conv(const Tensor& x, const Tensor& dynamic, const Tensor& base, const Tensor& row_in_block,
                            int64_t group_size, const Tensor& out) const;
  void top_k(const Tensor& logits, const Tensor& values, const Tensor& ids) const;
  void selector_pair_scores(const Tensor& a, const Tensor& h, const Tensor& b, const Tensor& out) const;
  void moe_route(const Tensor& logits, const MoeRouting& routing, const Tensor& expert_ids,
                 const Tensor& expert_weights) const;
  // x and out [M, H] float32, expert_ids [M, k] int32, expert_weights [M, k] float32, at least
  // one expert, all of one layout (gate and up, or gate_up) and of shapes [I, H] (gate_up
  // [2I, H]) and down [H, I] with the same I, and a usable activation. Returns I.
  int64_t moe_experts(const Tensor& x, const Tensor& expert_ids, const Tensor& expert_weights,
                      std::span<const ExpertWeights> experts, const ExpertActivation& activation,
                      const Tensor& out) const;

 private:
  // A weight or norm vector: on the device, f32, f16 or bf16.
  void weight(const Tensor& w, const char* name) const;
  // `listed` has a row per entry of `rows`, int32 indices into the rows of `indexed`.
  void row_index(const Tensor& listed, const Tensor& indexed, const Tensor& rows, const char* op) const;

  Device device_;
  const char* backend_;
};

}  // namespace flashq
