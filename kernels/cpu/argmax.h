// Greedy token choice on the CPU (twin: kernels/cuda/argmax.cu): ids[m] is the index of the
// largest logit of row m, the lowest on ties; NaN reads as -inf (cpu/sampling.h), so it never wins.
#pragma once

#include <cstdint>

namespace flashq::cpu {

void argmax(const float* logits, int32_t* ids, int64_t rows, int64_t vocab);

}  // namespace flashq::cpu
