// Gated DeltaNet's depthwise causal convolution with SiLU on the CPU (twin:
// kernels/cuda/causal_conv1d.cu), as Backend::causal_conv1d states (kernels/backend.h). Each
// output sums its K products in tap order, so a row's bits depend only on its inputs.
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_view.h"

namespace flashq::cpu {

// Rows [0, rows) of one sequence: x and out [rows, channels], weight [channels, kernel], state
// [kernel - 1, channels] (the inputs before row 0, oldest first), left holding the last
// kernel - 1 inputs.
void causal_conv1d(const float* x, WeightVector weight, int64_t rows, int64_t channels, int64_t kernel, float* state,
                   float* out);

}  // namespace flashq::cpu
