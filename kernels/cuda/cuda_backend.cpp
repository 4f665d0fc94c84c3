// The CUDA backend: checks shapes, dtypes and devices at the interface with the checks every
// backend shares (kernels/op_checks.h), then launches the kernels in this folder on the
// backend's stream.
//
// Memory: tensors come from the device's stream-ordered pool (cudaMallocAsync on our stream,
// kept in the pool on free), so the rare allocations (workspace growth, KV-cache growth) cost no
// device-wide synchronisation; per-op paths allocate nothing except when the cuBLAS scratch must
// grow. Every allocation holds the device context, so tensors may outlive the backend object.
//
// Ordering: every launch and copy goes to one stream; copy_to_host synchronises it and is where
// errors found by kernels (bad token ids, key counts beyond the keys) are thrown.
#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/argmax.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_windowed.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/causal_conv1d.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/deltanet_gates.h"
#include "kernels/cuda/device_context.h"
#include "kernels/cuda/dflash2_ops.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gated_delta_rule.h"
#include "kernels/cuda/gated_delta_rule_chunked.h"
#include "kernels/cuda/head_norm_rope.h"
#include "kernels/cuda/kv_store.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_bf16_rows.h"
#include "kernels/cuda/matmul_mxfp4.h"
#include "kernels/cuda/moe_experts.h"
#include "kernels/cuda/moe_route.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sampling.h"
#include "kernels/op_checks.h"
#include "shared/error.h"

namespace flashq {
namespace {

using cuda::check_cublas;
using cuda::check_cuda;
using cuda::DeviceContext;

constexpr OpChecks kChecks(Device::kCuda, "cuda");

// The shared checks under the names this file's own checks use (store_and_attend's and
// store_kv's, whose single-launch forms only this backend has).
void require(bool ok, const char* what) { kChecks.require(ok, what); }

template <std::invocable MakeMessage>
void require(bool ok, MakeMessage&& make_message) {
  kChecks.require(ok, std::forward<MakeMessage>(make_message));
}

void require_on_device(const Tensor& t, const char* name) { kChecks.on_device(t, name); }
void require_f32(const Tensor& t, const char* name) { kChecks.f32(t, name); }

class CudaBackend final : public Backend {
 public:
  CudaBackend() : context_(std::make_shared<DeviceContext>()) {
    slice_counters_ = allocate(DType::kI32, {cuda::kAttentionSliceCounters});  // zeros
  }
  ~CudaBackend() override {
    if (scratch_) cudaFreeAsync(scratch_, context_->stream());
    for (void* retired : retired_scratch_) cudaFreeAsync(retired, context_->stream());
  }

  Device device() const override { return Device::kCuda; }
  std::string name() const override { return "cuda"; }
  std::optional<DeviceMemory> memory() const override {
    size_t free_bytes = 0, total_bytes = 0;
    check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    return DeviceMemory{static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
  }

  Tensor allocate(DType dtype, Shape shape) override {
    refuse_while_capturing("allocate");
    Tensor probe(nullptr, nullptr, dtype, Device::kCuda, shape);
    const size_t bytes = probe.nbytes() == 0 ? 16 : probe.nbytes();
    void* memory = nullptr;
    check_cuda(cudaMallocAsync(&memory, bytes, stream()), "cudaMallocAsync");
    std::shared_ptr<DeviceContext> context = context_;
    // Stream-ordered free: work already launched on the memory finishes first.
    std::shared_ptr<void> owner(memory, [context](void* p) { cudaFreeAsync(p, context->stream()); });
    check_cuda(cudaMemsetAsync(memory, 0, bytes, stream()), "cudaMemsetAsync");
    return Tensor(std::move(owner), memory, dtype, Device::kCuda, std::move(shape));
  }

  Tensor upload_weight(const Tensor& host) override {
    if (host.device() == Device::kCuda) return host;
    refuse_while_capturing("upload_weight");
    Tensor weight = allocate(host.dtype(), host.shape());
    check_cuda(cudaMemcpyAsync(weight.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream()),
               "cudaMemcpyAsync (upload weight)");
    // The host view may be an mmapped file the caller unmaps next.
    check_cuda(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (upload weight)");
    return weight;
  }

  void copy_to_host(const Tensor& src, void* dst) override {
    refuse_while_capturing("copy_to_host");
    require_on_device(src, "copy_to_host src");
    if (src.nbytes() > 0) {
      check_cuda(cudaMemcpyAsync(dst, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, stream()),
                 "cudaMemcpyAsync (to host)");
    }
    context_->synchronize();
  }

  void copy_from_host(const void* src, Tensor& dst) override {
    refuse_while_capturing("copy_from_host");
    require_on_device(dst, "copy_from_host dst");
    if (dst.nbytes() == 0) return;
    // From pageable memory the copy is staged before the call returns, so `src` may be a
    // temporary of the caller's.
    check_cuda(cudaMemcpyAsync(dst.raw(), src, dst.nbytes(), cudaMemcpyHostToDevice, stream()),
               "cudaMemcpyAsync (from host)");
  }

  void copy_rows(const Tensor& src, Tensor& dst, int64_t first_row) override {
    kChecks.copy_rows(src, dst, first_row);
    if (src.nbytes() == 0) return;
    Tensor target = dst.slice_rows(first_row, src.dim(0));
    check_cuda(cudaMemcpyAsync(target.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, stream()),
               "cudaMemcpyAsync (copy_rows)");
  }

  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) override {
    kChecks.gather_rows(src, rows, dst);
    const int64_t row_elements = dst.dim(0) == 0 ? 0 : dst.numel() / dst.dim(0);
    cuda::gather_rows(src.raw(), rows.data<int32_t>(), dst.raw(), dst.dim(0), row_elements, dtype_size(dst.dtype()),
                      src.dim(0), context_->report(), stream());
  }

  void store_rows(const Tensor& src, Tensor& dst, const Tensor& rows) override {
    kChecks.store_rows(src, dst, rows);
    const int64_t row_floats = src.dim(0) == 0 ? 0 : src.numel() / src.dim(0);
    cuda::store_rows(src.data<float>(), dst.raw(), dst.dtype(), rows.data<int32_t>(), src.dim(0), row_floats,
                     dst.dim(0), context_->report(), stream());
  }

  void copy_columns(const Tensor& src, Tensor& dst, int64_t first_col) override {
    kChecks.copy_columns(src, dst, first_col);
    if (src.nbytes() == 0) return;
    const size_t element = dtype_size(src.dtype());
    check_cuda(
        cudaMemcpy2DAsync(static_cast<char*>(dst.raw()) + first_col * element, dst.cols() * element, src.raw(),
                          src.cols() * element, src.cols() * element, src.rows(), cudaMemcpyDeviceToDevice, stream()),
        "cudaMemcpy2DAsync (copy_columns)");
  }

  void matmul(const Tensor& x, const Tensor& w, Tensor& y) override {
    kChecks.matmul(x, w, y);
    void* scratch = grow_scratch(cuda::matmul_scratch_bytes(w.dtype(), x.rows(), x.cols()));
    cuda::matmul(x.data<float>(), w.raw(), w.dtype(), y.data<float>(), x.rows(), w.dim(0), w.dim(1), context_->cublas(),
                 scratch, stream());
  }

  void matmul_many(const Tensor& x, std::span<const WeightProduct> products) override {
    kChecks.matmul_many(x, products);
    bool one_launch = true;
    for (const WeightProduct& product : products) one_launch = one_launch && takes_bf16_rows_kernel(x, *product.w);
    if (!one_launch) return Backend::matmul_many(x, products);
    bf16_products_.clear();
    for (const WeightProduct& product : products) {
      bf16_products_.push_back({product.w->data<__nv_bfloat16>(), product.y->data<float>(), product.w->dim(0)});
    }
    void* scratch = grow_scratch(cuda::bf16_rows_scratch_bytes(x.rows(), x.cols()));
    cuda::matmul_bf16_rows_many(x.data<float>(), bf16_products_, x.rows(), x.cols(), scratch, stream());
  }

  void matmul_swiglu(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out, Tensor& scratch) override {
    kChecks.matmul(x, gate, out);
    kChecks.matmul(x, up, scratch);
    if (!takes_bf16_rows_kernel(x, gate) || !takes_bf16_rows_kernel(x, up)) {
      return Backend::matmul_swiglu(x, gate, up, out, scratch);
    }
    void* rounded = grow_scratch(cuda::bf16_rows_scratch_bytes(x.rows(), x.cols()));
    cuda::matmul_bf16_rows_swiglu(x.data<float>(), gate.data<__nv_bfloat16>(), up.data<__nv_bfloat16>(),
                                  out.data<float>(), x.rows(), gate.dim(0), x.cols(), rounded, stream());
  }

  // ---- mixture of experts and MXFP4 weights ----
  void matmul_mxfp4(const Tensor& x, const Tensor& blocks, const Tensor& scales, Tensor& y) override {
    kChecks.matmul_mxfp4(x, blocks, scales, y);
    cuda::matmul_mxfp4(x.data<float>(), blocks.data<uint8_t>(), scales.data<uint8_t>(), y.data<float>(), x.rows(),
                       blocks.dim(0), x.cols(), stream());
  }

  void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& expert_ids, Tensor& expert_weights) override {
    kChecks.moe_route(logits, routing, expert_ids, expert_weights);
    cuda::moe_route(logits.data<float>(), logits.dim(0), logits.dim(1), routing, expert_ids.data<int32_t>(),
                    expert_weights.data<float>(), stream());
  }

  void delta_rule_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor& g,
                        Tensor& beta) override {
    kChecks.delta_rule_gates(a, b, a_log, dt_bias, g, beta);
    cuda::delta_rule_gates(a.data<float>(), b.data<float>(), a_log.raw(), a_log.dtype(), dt_bias.raw(), dt_bias.dtype(),
                           a.dim(0), a.dim(1), g.data<float>(), beta.data<float>(), stream());
  }

  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) override {
    kChecks.gated_rmsnorm(x, z, w, out);
    cuda::gated_rmsnorm(x.data<float>(), z.data<float>(), w.raw(), w.dtype(), eps, x.dim(0) * x.dim(1), x.dim(2),
                        out.data<float>(), stream());
  }

  void sigmoid_gate(Tensor& x, const Tensor& gate) override {
    kChecks.sigmoid_gate(x, gate);
    const int64_t per_gate = x.numel() / std::max<int64_t>(gate.numel(), 1);
    cuda::sigmoid_gate(x.data<float>(), gate.data<float>(), x.numel(), per_gate, stream());
  }

  void grouped_dynamic_conv(const Tensor& x, const Tensor& dynamic, const Tensor& base, const Tensor& row_in_block,
                            int64_t group_size, Tensor& out) override {
    kChecks.grouped_dynamic_conv(x, dynamic, base, row_in_block, group_size, out);
    cuda::grouped_dynamic_conv(x.data<float>(), dynamic.data<float>(), base.raw(), base.dtype(),
                               row_in_block.data<int32_t>(), x.dim(0), x.dim(1), base.dim(0), group_size,
                               out.data<float>(), stream());
  }

  void top_k(const Tensor& logits, Tensor& values, Tensor& ids) override {
    kChecks.top_k(logits, values, ids);
    cuda::top_k(logits.data<float>(), logits.dim(0), logits.dim(1), ids.dim(1), values.data<float>(),
                ids.data<int32_t>(), stream());
  }

  void selector_pair_scores(const Tensor& a, const Tensor& h, const Tensor& b, Tensor& out) override {
    kChecks.selector_pair_scores(a, h, b, out);
    cuda::selector_pair_scores(a.data<float>(), h.data<float>(), b.data<float>(), h.dim(0), out.dim(1), h.dim(1),
                               out.data<float>(), stream());
  }

  void causal_conv1d(const Tensor& x, const Tensor& weight, std::span<const StateChunk> chunks, Tensor& out) override {
    kChecks.causal_conv1d(x, weight, chunks, out);
    const int64_t channels = x.dim(1);
    for (const StateChunk& c : chunks) {
      cuda::causal_conv1d(x.data<float>() + c.first_row * channels, weight.raw(), weight.dtype(), c.rows, channels,
                          weight.dim(1), c.state->data<float>(), out.data<float>() + c.first_row * channels, stream());
    }
  }

  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        std::span<const StateChunk> chunks, Tensor& out) override {
    kChecks.gated_delta_rule(q, k, v, g, beta, chunks, out);
    kChecks.require(q.dim(2) <= 1024 && v.dim(2) <= 1024, "gated_delta_rule: key and value dims of at most 1024");
    const cuda::DeltaRuleShape shape{q.dim(1), v.dim(1), q.dim(2), v.dim(2)};
    for (const StateChunk& c : chunks) {
      const auto rows_of = [&c](const Tensor& t) { return t.slice_rows(c.first_row, c.rows); };
      Tensor chunk_out = rows_of(out);
      cuda::gated_delta_rule(rows_of(q).data<float>(), rows_of(k).data<float>(), rows_of(v).data<float>(),
                             rows_of(g).data<float>(), rows_of(beta).data<float>(), c.rows, shape,
                             c.state->data<float>(), chunk_out.data<float>(), stream());
    }
  }

  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                std::span<const StateChunk> chunks, Tensor& out) override {
    kChecks.gated_delta_rule(q, k, v, g, beta, chunks, out);
    // A key dim whose chunk of rows shared memory cannot hold takes the recurrent form (equal
    // within the same tolerance).
    if (q.dim(2) > cuda::kDeltaRuleChunkedMaxKeyDim) return gated_delta_rule(q, k, v, g, beta, chunks, out);
    kChecks.require(v.dim(2) <= 1024, "gated_delta_rule_chunked: value dims of at most 1024");
    const cuda::DeltaRuleShape shape{q.dim(1), v.dim(1), q.dim(2), v.dim(2)};
    for (const StateChunk& c : chunks) {
      const auto rows_of = [&c](const Tensor& t) { return t.slice_rows(c.first_row, c.rows); };
      Tensor chunk_out = rows_of(out);
      cuda::gated_delta_rule_chunked(rows_of(q).data<float>(), rows_of(k).data<float>(), rows_of(v).data<float>(),
                                     rows_of(g).data<float>(), rows_of(beta).data<float>(), c.rows, shape,
                                     c.state->data<float>(), chunk_out.data<float>(), stream());
    }
  }

  int64_t delta_rule_chunk_rows() const override { return cuda::kDeltaRuleChunkRows; }
  bool prefers_chunked_delta_rule() const override { return true; }

  void moe_experts(const Tensor& x, const Tensor& expert_ids, const Tensor& expert_weights,
                   std::span<const ExpertWeights> experts, const ExpertActivation& activation, Tensor& out) override {
    const int64_t intermediate = kChecks.moe_experts(x, expert_ids, expert_weights, experts, activation, out);
    const cuda::MoeShape shape{x.dim(0), expert_ids.dim(1), x.dim(1), intermediate};
    device_experts_.clear();
    for (const ExpertWeights& e : experts) {
      device_experts_.push_back(
          {device_linear(e.gate), device_linear(e.up), device_linear(e.gate_up), device_linear(e.down)});
    }
    void* scratch = grow_scratch(cuda::moe_experts_scratch_bytes(shape));
    cuda::moe_experts(x.data<float>(), expert_ids.data<int32_t>(), expert_weights.data<float>(), shape, device_experts_,
                      activation, scratch, out.data<float>(), context_->report(), stream());
  }

  void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& y) override {
    kChecks.rmsnorm(x, w, y);
    cuda::rmsnorm(x.data<float>(), w.raw(), w.dtype(), eps, y.data<float>(), x.rows(), x.cols(), stream());
  }

  void add_rmsnorm(Tensor& h, const Tensor& delta, const Tensor& w, float eps, Tensor& y) override {
    kChecks.add_rmsnorm(h, delta, w, y);
    cuda::add_rmsnorm(h.data<float>(), delta.data<float>(), w.raw(), w.dtype(), eps, y.data<float>(), h.rows(),
                      h.cols(), stream());
  }

  void add(Tensor& h, const Tensor& delta) override {
    kChecks.add(h, delta);
    cuda::add(h.data<float>(), delta.data<float>(), h.numel(), stream());
  }

  void rope(Tensor& x, const Tensor& positions, const RopeOptions& rope) override {
    kChecks.rope(x, positions);
    require_rope(rope, "rope");
    cuda::rope(x.data<float>(), positions.data<int32_t>(), rope, x.dim(0), x.dim(1), x.dim(2), stream());
  }

  void head_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                      const RopeOptions& rope) override {
    kChecks.head_norm_rope(x, w, positions);
    require_rope(rope, "head_norm_rope");
    cuda::head_norm_rope(x.data<float>(), w.raw(), w.dtype(), eps, positions.data<int32_t>(), rope, x.dim(0), x.dim(1),
                         x.dim(2), stream());
  }

  void add_bias(Tensor& y, const Tensor& bias) override {
    kChecks.add_bias(y, bias);
    cuda::add_bias(y.data<float>(), bias.raw(), bias.dtype(), y.rows(), y.cols(), stream());
  }

  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_counts, Tensor& out,
                 const AttentionOptions& options) override {
    kChecks.attention(q, k, v, key_counts, out);
    require_attention_options(options, q, k.dim(0), Device::kCuda, "attention");
    const cuda::KvChunk chunk = kv_chunk(k, v, 0, options.block_table, options.block_size);
    attend(q, std::span(&chunk, 1), k.dtype(), key_counts, out, k.dim(1), k.dim(0), options);
  }

  // One launch stores every chunk's new rows, one attends all of them (and one merges the key
  // slices), in groups of as many chunks as a launch takes.
  void store_and_attend(const Tensor& q, const Tensor& k, const Tensor& v, std::span<const CacheChunk> chunks,
                        const Tensor& store_at, const Tensor& key_counts, Tensor& out, const QkNormRope* norm_rope,
                        const AttentionOptions& options) override {
    require_attention_inputs(q, key_counts, out);
    require_kv_inputs(k, v, chunks, store_at, q.dim(0), "store_and_attend");
    require(q.dim(2) == k.dim(2) && q.dim(1) % k.dim(1) == 0, "store_and_attend shapes");
    for (const CacheChunk& chunk : chunks) {
      require_attention_options(chunk_attention_options(options, chunk), q, chunk.keys->dim(0), Device::kCuda,
                                "store_and_attend");
    }
    if (norm_rope != nullptr) require_norm_rope_inputs(*norm_rope, q.dim(2), q.dim(0), true);
    static_assert(cuda::kMaxKvChunks <= cuda::kMaxKvStores, "a group of chunks is stored in one launch");
    std::vector<cuda::KvChunk> attended;
    for (size_t begin = 0; begin < chunks.size();) {
      const std::span<const CacheChunk> group = launch_group(chunks, begin, cuda::kMaxKvChunks);
      begin += group.size();
      store_group(&q, k, v, group, store_at, norm_rope);
      // The whole capacity of each cache: the key counts (on the device) say how much is used.
      // A paged chunk's cache is the store it shares; its store_at rows were already rows of it.
      const int64_t first = group.front().first_row;
      int64_t rows = 0, most_keys = 0;
      attended.clear();
      for (const CacheChunk& chunk : group) {
        const int64_t capacity = chunk.keys->dim(0);
        attended.push_back(
            kv_chunk(*chunk.keys, *chunk.values, chunk.first_row - first, chunk.block_table, chunk.block_size));
        rows += chunk.rows;
        most_keys = std::max(most_keys, capacity);
      }
      Tensor group_out = out.slice_rows(first, rows);
      AttentionOptions group_options = options;
      const Tensor group_starts = key_starts_of(options, first, rows);
      if (group_starts.defined()) group_options.key_starts = &group_starts;
      attend(q.slice_rows(first, rows), attended, group.front().keys->dtype(), key_counts.slice_rows(first, rows),
             group_out, k.dim(1), most_keys, group_options);
    }
  }

  void store_kv(const Tensor& k, const Tensor& v, std::span<const CacheChunk> chunks, const Tensor& store_at,
                const QkNormRope* norm_rope) override {
    require_kv_inputs(k, v, chunks, store_at, k.rank() > 0 ? k.dim(0) : 0, "store_kv");
    if (norm_rope != nullptr) require_norm_rope_inputs(*norm_rope, k.dim(2), k.dim(0), false);
    for (size_t begin = 0; begin < chunks.size();) {
      const std::span<const CacheChunk> group = launch_group(chunks, begin, cuda::kMaxKvStores);
      begin += group.size();
      store_group(nullptr, k, v, group, store_at, norm_rope);
    }
  }

  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    kChecks.swiglu(gate, up, out);
    cuda::swiglu(gate.data<float>(), up.data<float>(), out.data<float>(), gate.numel(), stream());
  }

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    kChecks.embedding(table, ids, out);
    cuda::embedding(table.raw(), table.dtype(), table.dim(0), ids.data<int32_t>(), out.data<float>(), ids.numel(),
                    table.dim(1), context_->report(), stream());
  }

  void argmax(const Tensor& logits, Tensor& ids) override {
    kChecks.argmax(logits, ids);
    cuda::argmax(logits.data<float>(), ids.data<int32_t>(), logits.rows(), logits.cols(), stream());
  }

  void sample(const Tensor& logits, const Tensor& params, Tensor& ids) override {
    kChecks.sample(logits, params, ids);
    cuda::sample_rows(logits.data<float>(), params.data<float>(), ids.data<int32_t>(), logits.rows(), logits.cols(),
                      stream());
  }

  // A CUDA graph of the stream's launches (capture mode thread-local: other threads' CUDA calls
  // are not disturbed).
  std::unique_ptr<CapturedOps> capture(const std::function<void()>& work) override {
    require(!capturing_, "capture while capturing");
    check_cuda(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    capturing_ = true;
    captured_any_ = true;
    cudaGraph_t graph = nullptr;
    try {
      work();
    } catch (...) {
      capturing_ = false;
      if (cudaStreamEndCapture(stream(), &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    capturing_ = false;
    check_cuda(cudaStreamEndCapture(stream(), &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check_cuda(instantiated, "cudaGraphInstantiate");
    return std::make_unique<CudaGraph>(context_, exec);
  }

  void replay(CapturedOps& ops) override {
    require(!capturing_, "replay while capturing");
    auto* graph = dynamic_cast<CudaGraph*>(&ops);
    require(graph != nullptr, "replay of ops another backend captured");
    check_cuda(cudaGraphLaunch(graph->exec(), stream()), "cudaGraphLaunch");
  }

 private:
  // What capture() returns: the instantiated graph, with the context (stream, device) it runs on.
  class CudaGraph final : public CapturedOps {
   public:
    CudaGraph(std::shared_ptr<DeviceContext> context, cudaGraphExec_t exec)
        : context_(std::move(context)), exec_(exec) {}
    ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;
    cudaGraphExec_t exec() const { return exec_; }

   private:
    std::shared_ptr<DeviceContext> context_;
    cudaGraphExec_t exec_;
  };

  cudaStream_t stream() const { return context_->stream(); }

  void refuse_while_capturing(const char* what) const {
    require(!capturing_, [&] {
      return std::string(what) + " while capturing ops: upload before capture() and replay(), read back after";
    });
  }

  // A layer's pointers for the kernels; all null for a layer the expert does not have.
  static cuda::DeviceLinear device_linear(const LinearWeight& w) {
    if (!w.weight.defined()) return {};
    return {w.weight.raw(),
            w.weight.dtype(),
            w.mxfp4() ? w.scales.data<uint8_t>() : nullptr,
            w.bias.defined() ? w.bias.raw() : nullptr,
            w.bias.defined() ? w.bias.dtype() : DType::kF32,
            w.in_features()};
  }

  // Whether cuda::matmul would take the tensor-core kernel for few rows: the only one that
  // runs several products, or the MLP's fused one, in a launch.
  static bool takes_bf16_rows_kernel(const Tensor& x, const Tensor& w) {
    return w.dtype() == DType::kBF16 && cuda::bf16_rows_supported(x.raw(), w.raw(), x.rows(), x.cols());
  }

  // A cache tensor (kernels/backend.h): on the device, float32 or bf16. Another dtype is the
  // caller's mistake, refused naming `op`.
  static void require_cache_dtype(const Tensor& t, const char* name, const char* op) {
    require_on_device(t, name);
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) {
      throw Error(ErrorCode::kInvalidArgument, std::string("cuda backend: ") + op + ": " + name +
                                                   " must be f32 or bf16, not " + std::string(dtype_name(t.dtype())));
    }
  }

  // A cache's keys and values: both float32 or both bf16.
  static void require_cache(const Tensor& keys, const Tensor& values, const char* op) {
    require_cache_dtype(keys, "cache keys", op);
    require_cache_dtype(values, "cache values", op);
    if (values.dtype() != keys.dtype()) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("cuda backend: ") + op + ": a cache's keys and values must have one dtype, not " +
                      std::string(dtype_name(keys.dtype())) + " and " + std::string(dtype_name(values.dtype())));
    }
  }

  // The chunks from `begin` that one launch takes: up to `most`, all with caches of one dtype
  // (a launch's kernel is compiled for one).
  static std::span<const CacheChunk> launch_group(std::span<const CacheChunk> chunks, size_t begin, size_t most) {
    const DType dtype = chunks[begin].keys->dtype();
    size_t end = begin + 1;
    while (end < chunks.size() && end - begin < most && chunks[end].keys->dtype() == dtype) ++end;
    return chunks.subspan(begin, end - begin);
  }

  // k and v [rows, Hkv, D], store_at [rows] int32, and chunks covering the rows, each with a
  // cache of [capacity, Hkv, D].
  static void require_kv_inputs(const Tensor& k, const Tensor& v, std::span<const CacheChunk> chunks,
                                const Tensor& store_at, int64_t rows, const char* op) {
    require_f32(k, "k");
    require_f32(v, "v");
    require(k.rank() == 3 && v.shape() == k.shape() && k.dim(0) == rows && k.dim(1) > 0,
            [&] { return std::string(op) + ": k and v shapes"; });
    require_on_device(store_at, "store_at");
    require(store_at.dtype() == DType::kI32 && store_at.numel() == rows,
            [&] { return std::string(op) + ": store_at must hold an int32 row per row"; });
    require_chunks_cover(chunks, rows, op);
    for (const CacheChunk& chunk : chunks) {
      require_cache(*chunk.keys, *chunk.values, op);
      require(chunk.keys->rank() == 3 && chunk.values->shape() == chunk.keys->shape() &&
                  chunk.keys->dim(1) == k.dim(1) && chunk.keys->dim(2) == k.dim(2),
              [&] { return std::string(op) + ": a cache's shape"; });
    }
  }

  // A position per row and, when the norm is there, its weights (of head_dim; q's only `with_q`).
  static void require_norm_rope_inputs(const QkNormRope& norm_rope, int64_t head_dim, int64_t rows, bool with_q) {
    require_norm_rope(norm_rope, with_q, "q/k norm and RoPE");
    require_on_device(*norm_rope.positions, "positions");
    require(norm_rope.positions->dtype() == DType::kI32 && norm_rope.positions->numel() == rows,
            "q/k norm and RoPE: an int32 position per row");
    if (norm_rope.k_norm != nullptr) {
      require_on_device(*norm_rope.k_norm, "k_norm");
      require(norm_rope.k_norm->numel() == head_dim && norm_rope.k_norm->dtype() != DType::kI32,
              "q/k norm and RoPE: k_norm must be f32, f16 or bf16 of head_dim");
    }
    if (with_q && norm_rope.q_norm != nullptr) {
      require_on_device(*norm_rope.q_norm, "q_norm");
      require(norm_rope.q_norm->numel() == head_dim && norm_rope.q_norm->dtype() != DType::kI32,
              "q/k norm and RoPE: q_norm must be f32, f16 or bf16 of head_dim");
    }
  }

  // The k and v rows of `group` (at most cuda::kMaxKvStores chunks, caches of one dtype:
  // launch_group) into their caches in one launch; with `norm_rope`, k's heads and, given q, q's
  // are normed and rotated first.
  void store_group(const Tensor* q, const Tensor& k, const Tensor& v, std::span<const CacheChunk> group,
                   const Tensor& store_at, const QkNormRope* norm_rope) {
    const int64_t first = group.front().first_row, row_floats = k.dim(1) * k.dim(2);
    const DType cache_dtype = group.front().keys->dtype();
    int64_t rows = 0;
    kv_stores_.clear();
    for (const CacheChunk& chunk : group) {
      kv_stores_.push_back({chunk.keys->raw(), chunk.values->raw(), chunk.first_row - first, chunk.keys->dim(0)});
      rows += chunk.rows;
    }
    const int32_t* at = store_at.data<int32_t>() + first;
    float* k_rows = k.data<float>() + first * row_floats;
    const float* v_rows = v.data<float>() + first * row_floats;
    if (norm_rope == nullptr) {
      cuda::store_kv_rows(k_rows, v_rows, kv_stores_, cache_dtype, at, rows, row_floats, context_->report(), stream());
      return;
    }
    const bool with_q = q != nullptr;
    // Null weights: RoPE only (a family without the q/k norm).
    const Tensor* q_norm = with_q ? norm_rope->q_norm : nullptr;
    const Tensor* k_norm = norm_rope->k_norm;
    const cuda::QkNormRope norm{q_norm != nullptr ? q_norm->raw() : nullptr,
                                q_norm != nullptr ? q_norm->dtype() : DType::kF32,
                                k_norm != nullptr ? k_norm->raw() : nullptr,
                                k_norm != nullptr ? k_norm->dtype() : DType::kF32,
                                norm_rope->eps,
                                norm_rope->positions->data<int32_t>() + first,
                                norm_rope->rope};
    float* q_rows = with_q ? q->data<float>() + first * q->dim(1) * q->dim(2) : nullptr;
    cuda::norm_rope_store_kv_rows(q_rows, with_q ? q->dim(1) : 0, k_rows, v_rows, k.dim(1), k.dim(2), norm, kv_stores_,
                                  cache_dtype, at, rows, context_->report(), stream());
  }

  static void require_attention_inputs(const Tensor& q, const Tensor& key_counts, const Tensor& out) {
    kChecks.attention_queries(q, key_counts, out);
    require_supported_head_dim(q);
  }

  static void require_supported_head_dim(const Tensor& q) {
    if (q.dim(2) > cuda::kMaxAttentionHeadDim) {
      throw Error(ErrorCode::kUnsupported, "cuda attention: head_dim " + std::to_string(q.dim(2)) + " above " +
                                               std::to_string(cuda::kMaxAttentionHeadDim));
    }
  }

  // The kernels' view of a cache (all its rows) and, when paged, of its block table.
  static cuda::KvChunk kv_chunk(const Tensor& keys, const Tensor& values, int64_t first_row, const Tensor* block_table,
                                int64_t block_size) {
    cuda::KvChunk chunk{keys.raw(), values.raw(), first_row, keys.dim(0)};
    if (block_table != nullptr) {
      chunk.block_table = block_table->data<int32_t>();
      chunk.block_size = block_size;
      chunk.table_blocks = block_table->numel();
    }
    return chunk;
  }

  // Sinks, a window or a paged chunk take their own simple kernel; the default options the fast
  // ones. Every chunk's cache holds `kv_dtype`.
  void attend(const Tensor& q, std::span<const cuda::KvChunk> chunks, DType kv_dtype, const Tensor& key_counts,
              Tensor& out, int64_t kv_heads, int64_t most_keys, const AttentionOptions& options) {
    const cuda::AttentionShape shape{q.dim(0), q.dim(1), kv_heads, q.dim(2), most_keys};
    const bool paged =
        std::any_of(chunks.begin(), chunks.end(), [](const cuda::KvChunk& c) { return c.block_table != nullptr; });
    if (options.sinks != nullptr || options.sliding_window > 0 || paged || options.key_starts != nullptr) {
      const cuda::AttentionSinksAndWindow extras{
          options.sinks != nullptr ? options.sinks->raw() : nullptr,
          options.sinks != nullptr ? options.sinks->dtype() : DType::kF32, options.sliding_window,
          options.key_starts != nullptr ? options.key_starts->data<int32_t>() : nullptr};
      cuda::attention_with_sinks_and_window(q.data<float>(), chunks, kv_dtype, key_counts.data<int32_t>(),
                                            out.data<float>(), shape, extras, context_->report(), stream());
      return;
    }
    void* scratch = grow_scratch(cuda::attention_scratch_bytes(shape, chunks));
    cuda::attention(q.data<float>(), chunks, kv_dtype, key_counts.data<int32_t>(), out.data<float>(), shape,
                    attention_kernels_, scratch, slice_counters_.data<int32_t>(), context_->report(), stream());
  }

  // The scratch buffer (cuBLAS's bf16 input, attention's partial results) grows to the largest
  // need seen and is reused: the stream orders each use after the previous one.
  void* grow_scratch(size_t bytes) {
    if (bytes <= scratch_bytes_) return scratch_;
    // A graph would keep the old buffer's address: run the same shapes once before capturing.
    require(!capturing_, "the scratch buffer would grow while capturing ops");
    // Graphs recorded before may still use the old buffer: it is kept until the backend goes.
    if (scratch_ && captured_any_) {
      retired_scratch_.push_back(scratch_);
    } else if (scratch_) {
      check_cuda(cudaFreeAsync(scratch_, stream()), "cudaFreeAsync (scratch)");
    }
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    check_cuda(cudaMallocAsync(&scratch_, bytes, stream()), "cudaMallocAsync (scratch)");
    scratch_bytes_ = bytes;
    return scratch_;
  }

  std::shared_ptr<DeviceContext> context_;
  // Read at start, so that a bad FLASHQ_CUDA_ATTENTION fails the backend's creation.
  const cuda::AttentionKernels attention_kernels_ = cuda::attention_kernels_from_environment();
  // Attention's count of finished slices per tile: zeros between calls, never reallocated.
  Tensor slice_counters_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<void*> retired_scratch_;
  std::vector<cuda::Bf16RowsProduct> bf16_products_;  // matmul_many's table, kept to allocate once
  std::vector<cuda::KvStore> kv_stores_;              // store_group's table, likewise
  std::vector<cuda::DeviceExpert> device_experts_;    // moe_experts' table, likewise
  bool capturing_ = false;
  bool captured_any_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace flashq
