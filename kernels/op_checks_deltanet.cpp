// The checks of Gated DeltaNet's ops (kernels/op_checks.h), shared by every backend.
#include <string>

#include "kernels/op_checks.h"

namespace flashq {
namespace {

// Chunks cover `rows` in order, each with a float32 state of `state` shape.
void check_chunks(const OpChecks& checks, std::span<const StateChunk> chunks, int64_t rows, const Shape& state,
                  const char* op) {
  int64_t next_row = 0;
  for (const StateChunk& chunk : chunks) {
    checks.require(chunk.state != nullptr && chunk.first_row == next_row && chunk.rows >= 0,
                   [&] { return std::string(op) + ": chunks must cover the rows in order, each with a state"; });
    checks.f32(*chunk.state, "state");
    checks.require(chunk.state->shape() == state, [&] {
      return std::string(op) + ": a state must be " + shape_to_string(state) + ", got " +
             shape_to_string(chunk.state->shape());
    });
    next_row += chunk.rows;
  }
  checks.require(next_row == rows, [&] { return std::string(op) + ": chunks must cover every row"; });
}

}  // namespace

void OpChecks::delta_rule_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias,
                                const Tensor& g, const Tensor& beta) const {
  for (const auto& [t, name] : {std::pair{&a, "a"}, {&b, "b"}, {&g, "g"}, {&beta, "beta"}}) f32(*t, name);
  on_device(a_log, "delta_rule_gates A_log");
  on_device(dt_bias, "delta_rule_gates dt_bias");
  require(a.rank() == 2 && b.shape() == a.shape() && g.shape() == a.shape() && beta.shape() == a.shape(), [&] {
    return "delta_rule_gates: a, b, g and beta must be one [rows, heads], got " + shape_to_string(a.shape()) + ", " +
           shape_to_string(b.shape()) + ", " + shape_to_string(g.shape()) + ", " + shape_to_string(beta.shape());
  });
  for (const Tensor* w : {&a_log, &dt_bias}) {
    require((w->dtype() == DType::kF32 || w->dtype() == DType::kBF16) && w->rank() == 1 && w->dim(0) == a.dim(1),
            "delta_rule_gates: A_log and dt_bias must be f32 or bf16 [heads]");
  }
}

void OpChecks::gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, const Tensor& out) const {
  f32(x, "gated_rmsnorm x");
  f32(z, "gated_rmsnorm z");
  f32(out, "gated_rmsnorm out");
  on_device(w, "gated_rmsnorm w");
  require(x.rank() == 3 && z.shape() == x.shape() && out.shape() == x.shape(), [&] {
    return "gated_rmsnorm: x, z and out must be one [rows, heads, dim], got " + shape_to_string(x.shape()) + ", " +
           shape_to_string(z.shape()) + ", " + shape_to_string(out.shape());
  });
  require((w.dtype() == DType::kF32 || w.dtype() == DType::kBF16) && w.rank() == 1 && w.dim(0) == x.dim(2),
          "gated_rmsnorm: w must be f32 or bf16 [dim]");
}

void OpChecks::sigmoid_gate(const Tensor& x, const Tensor& gate) const {
  f32(x, "sigmoid_gate x");
  f32(gate, "sigmoid_gate gate");
  const bool per_row = x.shape().size() == 2 && gate.shape() == Shape{x.dim(0), 1};
  require(gate.shape() == x.shape() || per_row, [&] {
    return "sigmoid_gate: gate must have x's shape or be [rows, 1], got " + shape_to_string(x.shape()) + " and " +
           shape_to_string(gate.shape());
  });
}

void OpChecks::causal_conv1d(const Tensor& x, const Tensor& weight, std::span<const StateChunk> chunks,
                             const Tensor& out) const {
  f32(x, "causal_conv1d x");
  f32(out, "causal_conv1d out");
  on_device(weight, "causal_conv1d weight");
  require(weight.dtype() == DType::kF32 || weight.dtype() == DType::kBF16, "causal_conv1d: weight must be f32 or bf16");
  require(x.rank() == 2 && out.shape() == x.shape() && weight.rank() == 2 && weight.dim(0) == x.dim(1) &&
              weight.dim(1) >= 1,
          [&] {
            return "causal_conv1d: x and out [rows, channels], weight [channels, kernel], got " +
                   shape_to_string(x.shape()) + ", " + shape_to_string(out.shape()) + ", " +
                   shape_to_string(weight.shape());
          });
  check_chunks(*this, chunks, x.dim(0), {weight.dim(1) - 1, x.dim(1)}, "causal_conv1d");
}

void OpChecks::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                std::span<const StateChunk> chunks, const Tensor& out) const {
  for (const auto& [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&g, "g"}, {&beta, "beta"}, {&out, "out"}}) {
    f32(*t, name);
  }
  require(q.rank() == 3 && k.shape() == q.shape(), [&] {
    return "gated_delta_rule: q and k must be [rows, key heads, key dim], got " + shape_to_string(q.shape()) +
           " and " + shape_to_string(k.shape());
  });
  require(v.rank() == 3 && v.dim(0) == q.dim(0) && out.shape() == v.shape(), [&] {
    return "gated_delta_rule: v and out must be [rows, value heads, value dim], got " + shape_to_string(v.shape()) +
           " and " + shape_to_string(out.shape());
  });
  const int64_t rows = q.dim(0), key_heads = q.dim(1), value_heads = v.dim(1);
  require(key_heads > 0 && value_heads % key_heads == 0, "gated_delta_rule: the key heads must divide the value heads");
  const Shape per_head{rows, value_heads};
  require(g.shape() == per_head && beta.shape() == per_head, [&] {
    return "gated_delta_rule: g and beta must be " + shape_to_string(per_head);
  });
  check_chunks(*this, chunks, rows, {value_heads, q.dim(2), v.dim(2)}, "gated_delta_rule");
}

}  // namespace flashq
