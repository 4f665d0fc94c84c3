// Gated DeltaNet's recurrence in its chunked form on the CPU (twin:
// kernels/cuda/gated_delta_rule_chunked.cu), as Backend::gated_delta_rule_chunked states: rows
// in chunks of kDeltaRuleChunkRows, each chunk's rows at once through a unit lower-triangular
// system (the WY form of the delta rule) and products with the state, then the state carried to
// the next chunk. Equal to the recurrent form (gated_delta_rule.h) within float tolerance, not
// to the bit: the sums run in another order. Within a chunk of rows 1..C with G_i = g_1 + ... +
// g_i and D[i, j] = exp(G_i - G_j) (i >= j), from the state S before it:
//   u_i = beta_i v_i - beta_i exp(G_i) S^T k_i - sum over j < i of beta_i (k_i . k_j) D[i, j] u_j
//   out_i = exp(G_i) S^T q_i + sum over j <= i of (q_i . k_j) D[i, j] u_j
//   S <- exp(G_C) S + sum over i of exp(G_C - G_i) k_i u_i^T
// u_i is the recurrent form's correction at row i (beta_i (v_i - S_{i-1}^T k_i) with S_{i-1}
// decayed), written in terms of the chunk's first state. tests/reference/qwen3_5_reference.py
// (delta_rule_chunked) derives the same form.
#pragma once

#include <cstdint>

#include "kernels/cpu/gated_delta_rule.h"

namespace flashq::cpu {

inline constexpr int64_t kDeltaRuleChunkRows = 64;

// As gated_delta_rule (gated_delta_rule.h), chunk by chunk.
void gated_delta_rule_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                              int64_t rows, DeltaRuleShape s, float* state, float* out);

}  // namespace flashq::cpu
