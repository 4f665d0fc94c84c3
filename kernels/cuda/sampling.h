// Sampling one token per row on the GPU (twin: cpu::sample_rows in kernels/cpu/sampling.h, which
// states the distribution and the draw): only the chosen ids go back to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashq::cuda {

// params: rows x {temperature, top_k, top_p, u}, float32 on the device.
void sample_rows(const float* logits, const float* params, int32_t* ids, int64_t rows, int64_t vocab,
                 cudaStream_t stream);

}  // namespace flashq::cuda
