// Gated DeltaNet's depthwise causal convolution with SiLU on the GPU (twin:
// kernels/cpu/causal_conv1d.cpp). Simple: one launch per sequence, a thread per channel, which
// reads its taps from the state or the chunk, then shifts its own column of the state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

// One sequence's rows (x and out at its first row); weight [channels, kernel] f32 or bf16;
// state [kernel - 1, channels], updated in place.
void causal_conv1d(const float* x, const void* weight, DType weight_dtype, int64_t rows, int64_t channels,
                   int64_t kernel, float* state, float* out, cudaStream_t stream);

}  // namespace flashq::cuda
