// The checks of Gated DeltaNet's op (kernels/op_checks.h), shared by every backend.
#include <string>

#include "kernels/op_checks.h"

namespace flashq {

void OpChecks::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                std::span<const DeltaRuleChunk> chunks, const Tensor& out) const {
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
  const Shape state{value_heads, q.dim(2), v.dim(2)};
  int64_t next_row = 0;
  for (const DeltaRuleChunk& chunk : chunks) {
    require(chunk.state != nullptr && chunk.first_row == next_row && chunk.rows >= 0,
            "gated_delta_rule: chunks must cover the rows in order, each with a state");
    f32(*chunk.state, "gated_delta_rule state");
    require(chunk.state->shape() == state, [&] {
      return "gated_delta_rule: a state must be " + shape_to_string(state) + ", got " +
             shape_to_string(chunk.state->shape());
    });
    next_row += chunk.rows;
  }
  require(next_row == rows, "gated_delta_rule: chunks must cover every row");
}

}  // namespace flashq
