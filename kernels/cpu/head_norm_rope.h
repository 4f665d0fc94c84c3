// The q/k norm and RoPE in one call on the CPU (twin: kernels/cuda/head_norm_rope.cu): rmsnorm of
// each head of x[rows, heads, head_dim] with w (of head_dim), then rope, in place. On the CPU the
// two passes are cache-resident per row block already, so the twin is the pair of kernels.
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_view.h"
#include "kernels/rope_frequency.h"

namespace flashq::cpu {

void head_norm_rope(float* x, WeightVector w, float eps, const int32_t* positions, const RopeOptions& rope,
                    int64_t rows,
                    int64_t heads, int64_t head_dim);

}  // namespace flashq::cpu
