// The CPU backend: the reference every other backend is tested against, and the embedded
// default. Checks shapes and dtypes at the interface (kernels/op_checks.h), then calls the
// kernels in this folder.
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/argmax.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bias.h"
#include "kernels/cpu/causal_conv1d.h"
#include "kernels/cpu/deltanet_gates.h"
#include "kernels/cpu/dflash2_ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/gated_delta_rule_chunked.h"
#include "kernels/cpu/head_norm_rope.h"
#include "kernels/cpu/kv_store.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_mxfp4.h"
#include "kernels/cpu/moe_experts.h"
#include "kernels/cpu/moe_route.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sampling.h"
#include "kernels/op_checks.h"
#include "shared/error.h"

namespace flashq {
namespace {

constexpr OpChecks kChecks(Device::kCpu, "cpu");

cpu::WeightVector weight_vector(const Tensor& w) { return {w.raw(), w.dtype()}; }

// Bytes in one row of a tensor listed row by row against `rows` (gather_rows' dst, store_rows' src).
size_t listed_row_bytes(const Tensor& listed, const Tensor& rows) {
  return rows.numel() == 0 ? 0 : listed.nbytes() / static_cast<size_t>(rows.numel());
}

// What CpuBackend::capture records: each op as a closure holding its tensors (so their memory
// outlives the recording, as a CUDA graph's does not need) and its arguments as they were.
class CpuCapturedOps final : public CapturedOps {
 public:
  std::vector<std::function<void()>> ops;
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  std::string name() const override { return "cpu"; }

  Tensor allocate(DType dtype, Shape shape) override {
    refuse_while_recording("allocate");
    return Tensor::zeros_cpu(dtype, std::move(shape));
  }
  Tensor upload_weight(const Tensor& host) override {
    refuse_while_recording("upload_weight");
    return host;
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    refuse_while_recording("copy_to_host");
    if (src.nbytes() > 0) std::memcpy(dst, src.raw(), src.nbytes());  // an empty tensor may hold no memory
  }
  void copy_from_host(const void* src, Tensor& dst) override {
    refuse_while_recording("copy_from_host");
    if (dst.nbytes() > 0) std::memcpy(dst.raw(), src, dst.nbytes());  // nor need an empty vector's data
  }

  void copy_rows(const Tensor& src, Tensor& dst, int64_t first_row) override {
    kChecks.copy_rows(src, dst, first_row);
    run([src, target = dst.slice_rows(first_row, src.dim(0))] { std::memcpy(target.raw(), src.raw(), src.nbytes()); });
  }

  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) override {
    kChecks.gather_rows(src, rows, dst);
    run([src, dst, rows] {
      cpu::gather_rows(src.raw(), rows.data<int32_t>(), dst.raw(), rows.numel(), listed_row_bytes(dst, rows),
                       src.dim(0));
    });
  }

  void store_rows(const Tensor& src, Tensor& dst, const Tensor& rows) override {
    kChecks.store_rows(src, dst, rows);
    run([src, dst, rows] {
      if (dst.dtype() == DType::kBF16) {
        const int64_t row_elements = rows.numel() == 0 ? 0 : src.numel() / rows.numel();
        cpu::store_rows_bf16(src.data<float>(), dst.data<uint16_t>(), rows.data<int32_t>(), rows.numel(), row_elements,
                             dst.dim(0));
      } else {
        cpu::store_rows(src.raw(), dst.raw(), rows.data<int32_t>(), rows.numel(), listed_row_bytes(src, rows),
                        dst.dim(0));
      }
    });
  }

  void copy_columns(const Tensor& src, Tensor& dst, int64_t first_col) override {
    kChecks.copy_columns(src, dst, first_col);
    run([src, dst, first_col] {
      const size_t element = dtype_size(src.dtype());
      const char* from = static_cast<const char*>(src.raw());
      char* to = static_cast<char*>(dst.raw());
      for (int64_t m = 0; m < src.rows(); ++m) {
        std::memcpy(to + (m * dst.cols() + first_col) * element, from + m * src.cols() * element, src.cols() * element);
      }
    });
  }

  void matmul(const Tensor& x, const Tensor& w, Tensor& y) override {
    kChecks.matmul(x, w, y);
    run([x, w, y] { cpu::matmul(x.data<float>(), w.raw(), w.dtype(), y.data<float>(), x.rows(), w.dim(0), w.dim(1)); });
  }

  // ---- mixture of experts and MXFP4 weights ----
  void matmul_mxfp4(const Tensor& x, const Tensor& blocks, const Tensor& scales, Tensor& y) override {
    kChecks.matmul_mxfp4(x, blocks, scales, y);
    run([x, blocks, scales, y] {
      cpu::matmul_mxfp4(x.data<float>(), blocks.data<uint8_t>(), scales.data<uint8_t>(), y.data<float>(), x.rows(),
                        blocks.dim(0), x.cols());
    });
  }

  void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& expert_ids, Tensor& expert_weights) override {
    kChecks.moe_route(logits, routing, expert_ids, expert_weights);
    run([logits, routing, expert_ids, expert_weights] {
      cpu::moe_route(logits.data<float>(), logits.dim(0), logits.dim(1), routing, expert_ids.data<int32_t>(),
                     expert_weights.data<float>());
    });
  }

  void delta_rule_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor& g,
                        Tensor& beta) override {
    kChecks.delta_rule_gates(a, b, a_log, dt_bias, g, beta);
    run([a, b, a_log, dt_bias, g, beta] {
      cpu::delta_rule_gates(a.data<float>(), b.data<float>(), weight_vector(a_log), weight_vector(dt_bias), a.dim(0),
                            a.dim(1), g.data<float>(), beta.data<float>());
    });
  }

  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) override {
    kChecks.gated_rmsnorm(x, z, w, out);
    run([x, z, w, eps, out] {
      cpu::gated_rmsnorm(x.data<float>(), z.data<float>(), weight_vector(w), eps, x.dim(0) * x.dim(1), x.dim(2),
                         out.data<float>());
    });
  }

  void sigmoid_gate(Tensor& x, const Tensor& gate) override {
    kChecks.sigmoid_gate(x, gate);
    const int64_t per_gate = x.numel() / std::max<int64_t>(gate.numel(), 1);
    run([x, gate, per_gate] { cpu::sigmoid_gate(x.data<float>(), gate.data<float>(), x.numel(), per_gate); });
  }

  void causal_conv1d(const Tensor& x, const Tensor& weight, std::span<const StateChunk> chunks, Tensor& out) override {
    kChecks.causal_conv1d(x, weight, chunks, out);
    std::vector<std::pair<StateChunk, Tensor>> runs;  // each chunk with its state, held as the op runs
    for (const StateChunk& c : chunks) runs.emplace_back(c, *c.state);
    run([x, weight, out, runs] {
      const int64_t channels = x.dim(1);
      for (const auto& chunk_run : runs) {
        const int64_t first = chunk_run.first.first_row;
        cpu::causal_conv1d(x.data<float>() + first * channels, weight_vector(weight), chunk_run.first.rows, channels,
                           weight.dim(1), chunk_run.second.data<float>(), out.data<float>() + first * channels);
      }
    });
  }

  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        std::span<const StateChunk> chunks, Tensor& out) override {
    run_delta_rule(cpu::gated_delta_rule, q, k, v, g, beta, chunks, out);
  }

  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                std::span<const StateChunk> chunks, Tensor& out) override {
    run_delta_rule(cpu::gated_delta_rule_chunked, q, k, v, g, beta, chunks, out);
  }

  int64_t delta_rule_chunk_rows() const override { return cpu::kDeltaRuleChunkRows; }
  bool prefers_chunked_delta_rule() const override { return false; }

  void moe_experts(const Tensor& x, const Tensor& expert_ids, const Tensor& expert_weights,
                   std::span<const ExpertWeights> experts, const ExpertActivation& activation, Tensor& out) override {
    const int64_t intermediate = kChecks.moe_experts(x, expert_ids, expert_weights, experts, activation, out);
    const cpu::MoeShape shape{x.dim(0), expert_ids.dim(1), x.dim(1), intermediate};
    auto op = [x, expert_ids, expert_weights, activation, out, shape](std::span<const ExpertWeights> held) {
      const int32_t* ids = expert_ids.data<int32_t>();  // read when the op runs, as on a GPU
      const auto count = static_cast<int64_t>(held.size());
      for (int64_t s = 0; s < expert_ids.numel(); ++s) {
        kChecks.require(ids[s] >= 0 && ids[s] < count, [&] {
          return "moe_experts: expert id " + std::to_string(ids[s]) + " outside [0, " + std::to_string(count) + ")";
        });
      }
      cpu::moe_experts(x.data<float>(), ids, expert_weights.data<float>(), shape, held, activation, out.data<float>());
    };
    if (recording_ == nullptr) return op(experts);
    // Recorded, the closure holds the experts' tensors, as every recorded op holds its own.
    run([op, held = std::vector<ExpertWeights>(experts.begin(), experts.end())] { op(held); });
  }

  void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& y) override {
    kChecks.rmsnorm(x, w, y);
    run([x, w, eps, y] { cpu::rmsnorm(x.data<float>(), weight_vector(w), eps, y.data<float>(), x.rows(), x.cols()); });
  }

  void add_rmsnorm(Tensor& h, const Tensor& delta, const Tensor& w, float eps, Tensor& y) override {
    kChecks.add_rmsnorm(h, delta, w, y);
    run([h, delta, w, eps, y] {
      cpu::add_rmsnorm(h.data<float>(), delta.data<float>(), weight_vector(w), eps, y.data<float>(), h.rows(),
                       h.cols());
    });
  }

  void add(Tensor& h, const Tensor& delta) override {
    kChecks.add(h, delta);
    run([h, delta] { cpu::add(h.data<float>(), delta.data<float>(), h.numel()); });
  }

  void rope(Tensor& x, const Tensor& positions, const RopeOptions& rope) override {
    kChecks.rope(x, positions);
    require_rope(rope, "rope");
    run([x, positions, rope] {
      cpu::rope(x.data<float>(), positions.data<int32_t>(), rope, x.dim(0), x.dim(1), x.dim(2));
    });
  }

  void head_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                      const RopeOptions& rope) override {
    kChecks.head_norm_rope(x, w, positions);
    require_rope(rope, "head_norm_rope");
    run([x, w, eps, positions, rope] {
      cpu::head_norm_rope(x.data<float>(), weight_vector(w), eps, positions.data<int32_t>(), rope, x.dim(0), x.dim(1),
                          x.dim(2));
    });
  }

  void add_bias(Tensor& y, const Tensor& bias) override {
    kChecks.add_bias(y, bias);
    run([y, bias] { cpu::add_bias(y.data<float>(), weight_vector(bias), y.rows(), y.cols()); });
  }

  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_counts, Tensor& out,
                 const AttentionOptions& options) override {
    kChecks.attention(q, k, v, key_counts, out);
    require_attention_options(options, q, k.dim(0), Device::kCpu, "attention");
    const int64_t window = options.sliding_window;
    // The sinks as floats, read when the op runs (a weight's contents, like the key counts).
    const std::optional<Tensor> sinks = options.sinks != nullptr ? std::optional(*options.sinks) : std::nullopt;
    const std::optional<Tensor> table =
        options.block_table != nullptr ? std::optional(*options.block_table) : std::nullopt;
    const int64_t block_size = options.block_size;
    const std::optional<Tensor> starts =
        options.key_starts != nullptr ? std::optional(*options.key_starts) : std::nullopt;
    run([q, k, v, key_counts, out, window, sinks, table, block_size, starts] {
      const int32_t* counts = key_counts.data<int32_t>();  // read when the op runs, as on a GPU
      if (starts) {
        for (int64_t m = 0; m < q.dim(0); ++m)
          kChecks.require(starts->data<int32_t>()[m] >= 0, "attention key start < 0");
      }
      // A window reads a ring: any count, its last `window` positions wrapped into the keys. A
      // paged store is read through the table: every block a count reaches (from the window's
      // first, with one) must be listed and lie in the store.
      if (table) {
        const int32_t* blocks = table->data<int32_t>();
        const int64_t store_blocks = k.dim(0) / block_size;
        for (int64_t m = 0; m < q.dim(0); ++m) {
          const int64_t needed = (int64_t{counts[m]} + block_size - 1) / block_size;
          kChecks.require(counts[m] >= 0 && needed <= table->numel(), "attention key count beyond the block table");
          const int64_t first = window > 0 ? std::max<int64_t>(0, counts[m] - window) / block_size : 0;
          for (int64_t b = first; b < needed; ++b) {
            kChecks.require(blocks[b] >= 0 && blocks[b] < store_blocks, "attention block id outside the store");
          }
        }
      } else if (window == 0) {
        for (int64_t m = 0; m < q.dim(0); ++m) {
          kChecks.require(counts[m] <= k.dim(0), "attention key count beyond keys");
        }
      }
      std::vector<float> sink_logits;
      if (sinks) {
        sink_logits.resize(static_cast<size_t>(sinks->numel()));
        for (int64_t h = 0; h < sinks->numel(); ++h) {
          sink_logits[h] =
              sinks->dtype() == DType::kBF16 ? bf16_to_f32(sinks->data<uint16_t>()[h]) : sinks->data<float>()[h];
        }
      }
      const cpu::AttentionShape shape{q.dim(0), q.dim(1), k.dim(1), q.dim(2)};
      const cpu::AttentionExtras extras{
          sinks ? sink_logits.data() : nullptr,     window,     k.dim(0),
          table ? table->data<int32_t>() : nullptr, block_size, starts ? starts->data<int32_t>() : nullptr};
      if (k.dtype() == DType::kBF16) {
        cpu::attention(q.data<float>(), k.data<uint16_t>(), v.data<uint16_t>(), counts, out.data<float>(), shape,
                       extras);
      } else {
        cpu::attention(q.data<float>(), k.data<float>(), v.data<float>(), counts, out.data<float>(), shape, extras);
      }
    });
  }

  void grouped_dynamic_conv(const Tensor& x, const Tensor& dynamic, const Tensor& base, const Tensor& row_in_block,
                            int64_t group_size, Tensor& out) override {
    kChecks.grouped_dynamic_conv(x, dynamic, base, row_in_block, group_size, out);
    run([x, dynamic, base, row_in_block, group_size, out] {
      for (int64_t t = 0; t < x.dim(0); ++t) {
        kChecks.require(row_in_block.data<int32_t>()[t] >= 0, "grouped_dynamic_conv row_in_block < 0");
      }
      cpu::grouped_dynamic_conv(x.data<float>(), dynamic.data<float>(), weight_vector(base),
                                row_in_block.data<int32_t>(), x.dim(0), x.dim(1), base.dim(0), group_size,
                                out.data<float>());
    });
  }

  void top_k(const Tensor& logits, Tensor& values, Tensor& ids) override {
    kChecks.top_k(logits, values, ids);
    run([logits, values, ids] {
      cpu::top_k(logits.data<float>(), logits.dim(0), logits.dim(1), ids.dim(1), values.data<float>(),
                 ids.data<int32_t>());
    });
  }

  void selector_pair_scores(const Tensor& a, const Tensor& h, const Tensor& b, Tensor& out) override {
    kChecks.selector_pair_scores(a, h, b, out);
    run([a, h, b, out] {
      cpu::selector_pair_scores(a.data<float>(), h.data<float>(), b.data<float>(), h.dim(0), out.dim(1), h.dim(1),
                                out.data<float>());
    });
  }

  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    kChecks.swiglu(gate, up, out);
    run([gate, up, out] { cpu::swiglu(gate.data<float>(), up.data<float>(), out.data<float>(), gate.numel()); });
  }

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    kChecks.embedding(table, ids, out);
    run([table, ids, out] {
      const int32_t* id = ids.data<int32_t>();
      for (int64_t m = 0; m < ids.numel(); ++m) {
        if (id[m] < 0 || id[m] >= table.dim(0)) {
          throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id[m]) +
                                                       " is outside the embedding table of " +
                                                       std::to_string(table.dim(0)) + " rows");
        }
      }
      cpu::embedding(table.raw(), table.dtype(), id, out.data<float>(), ids.numel(), table.dim(1));
    });
  }

  void argmax(const Tensor& logits, Tensor& ids) override {
    kChecks.argmax(logits, ids);
    run([logits, ids] { cpu::argmax(logits.data<float>(), ids.data<int32_t>(), logits.rows(), logits.cols()); });
  }

  void sample(const Tensor& logits, const Tensor& params, Tensor& ids) override {
    kChecks.sample(logits, params, ids);
    run([logits, params, ids] {
      cpu::sample_rows(logits.data<float>(), params.data<float>(), ids.data<int32_t>(), logits.rows(), logits.cols());
    });
  }

  // The CPU twin of a CUDA graph: ops are recorded with their arguments as they were, so a
  // replay sees exactly what a graph would (new contents, the old addresses and sizes).
  std::unique_ptr<CapturedOps> capture(const std::function<void()>& work) override {
    kChecks.require(recording_ == nullptr, "capture while capturing");
    auto captured = std::make_unique<CpuCapturedOps>();
    recording_ = &captured->ops;
    try {
      work();
    } catch (...) {
      recording_ = nullptr;
      throw;
    }
    recording_ = nullptr;
    return captured;
  }

  void replay(CapturedOps& ops) override {
    kChecks.require(recording_ == nullptr, "replay while capturing");
    auto* recorded = dynamic_cast<CpuCapturedOps*>(&ops);
    kChecks.require(recorded != nullptr, "replay of ops another backend captured");
    for (const std::function<void()>& op : recorded->ops) op();
  }

 private:
  // Runs an op now, or records it while capturing.
  template <typename Op>
  void run(Op&& op) {
    if (recording_ != nullptr) {
      recording_->emplace_back(std::forward<Op>(op));
    } else {
      op();
    }
  }

  // Either form of the delta rule (`rule`: cpu::gated_delta_rule or its chunked twin), sequence
  // by sequence from its state.
  using DeltaRule = void (*)(const float*, const float*, const float*, const float*, const float*, int64_t,
                             cpu::DeltaRuleShape, float*, float*);
  void run_delta_rule(DeltaRule rule, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                      const Tensor& beta, std::span<const StateChunk> chunks, Tensor& out) {
    kChecks.gated_delta_rule(q, k, v, g, beta, chunks, out);
    const cpu::DeltaRuleShape shape{q.dim(1), v.dim(1), q.dim(2), v.dim(2)};
    std::vector<std::pair<StateChunk, Tensor>> runs;  // each chunk with its state, held as the op runs
    for (const StateChunk& c : chunks) runs.emplace_back(c, *c.state);
    run([rule, q, k, v, g, beta, out, shape, runs] {
      for (const auto& chunk_run : runs) {
        const int64_t first = chunk_run.first.first_row, rows = chunk_run.first.rows;
        const Tensor& state = chunk_run.second;
        const auto at = [first](const Tensor& t, int64_t per_row) { return t.data<float>() + first * per_row; };
        rule(at(q, shape.key_heads * shape.key_dim), at(k, shape.key_heads * shape.key_dim),
             at(v, shape.value_heads * shape.value_dim), at(g, shape.value_heads), at(beta, shape.value_heads), rows,
             shape, state.data<float>(), at(out, shape.value_heads * shape.value_dim));
      }
    });
  }

  void refuse_while_recording(const char* what) const {
    kChecks.require(recording_ == nullptr, [&] {
      return std::string(what) + " while capturing ops: upload before capture() and replay(), read back after";
    });
  }

  std::vector<std::function<void()>>* recording_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace flashq
