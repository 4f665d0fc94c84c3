// Greedy token choice on the GPU (twin: kernels/cpu/argmax.cpp): ids[m] is
// the index of the largest value of logits row m, the lowest such index on ties. NaN never wins.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashq::cuda {

void argmax(const float* logits, int32_t* ids, int64_t rows, int64_t vocab, cudaStream_t stream);

}  // namespace flashq::cuda
