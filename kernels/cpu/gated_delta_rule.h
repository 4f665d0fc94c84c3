// Gated DeltaNet's recurrence on the CPU (twin: kernels/cuda/gated_delta_rule.cu), as
// Backend::gated_delta_rule states (kernels/backend.h): the recurrent form, row by row. It is
// the form for every pass here, prefill included: a row's bits then depend only on its
// sequence's rows before it, so verification, decoding and a preempted sequence's recompute agree
// to the bit, and its cost (about 8 Dk Dv flops a row and value head) is a small part of a
// layer's projections.
#pragma once

#include <cstdint>

namespace flashq::cpu {

struct DeltaRuleShape {
  int64_t key_heads, value_heads, key_dim, value_dim;
};

// y = scale * x / sqrt(sum x^2 + 1e-6) over n values, as the published layers normalise q and k
// (FLA's l2norm); both forms of the rule use it.
void l2_normalise(const float* x, int64_t n, float scale, float* y);

// Rows [0, rows) of one sequence from `state` [value_heads, key_dim, value_dim], updated in
// place; q and k [rows, key_heads, key_dim], v and out [rows, value_heads, value_dim], g and
// beta [rows, value_heads]. Value heads run in parallel.
void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t rows,
                      DeltaRuleShape s, float* state, float* out);

}  // namespace flashq::cpu
