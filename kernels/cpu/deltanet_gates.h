// The element-wise pieces of the Qwen3.5 / Qwen3-Next layers on the CPU (twin:
// kernels/cuda/deltanet_gates.cu), as Backend::delta_rule_gates, gated_rmsnorm and sigmoid_gate
// state (kernels/backend.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_view.h"

namespace flashq::cpu {

// a, b, g, beta [rows, heads]; a_log and dt_bias [heads].
void delta_rule_gates(const float* a, const float* b, WeightVector a_log, WeightVector dt_bias, int64_t rows,
                      int64_t heads, float* g, float* beta);
// x, z, out [rows * heads, dim] (out may be x); w [dim].
void gated_rmsnorm(const float* x, const float* z, WeightVector w, float eps, int64_t vectors, int64_t dim, float* out);
// x[i] *= sigmoid(gate[i / per_gate]): per_gate 1 (element-wise) or a row's width (a gate per row).
void sigmoid_gate(float* x, const float* gate, int64_t count, int64_t per_gate);

}  // namespace flashq::cpu
