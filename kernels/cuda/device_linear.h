// A linear layer as the GPU kernels take it (kernels/linear_weight.h, from host code or device
// code): plain pointers to a dense weight or to MXFP4 blocks and scales, and the optional bias.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

struct DeviceLinear {
  const void* weight = nullptr;     // dense [out, in], or MXFP4 blocks u8 [out, in / 2]
  DType dtype = DType::kF32;        // the dense weight's
  const uint8_t* scales = nullptr;  // MXFP4 only: u8 [out, in / 32]
  const void* bias = nullptr;       // null: no bias
  DType bias_dtype = DType::kF32;
  int64_t in = 0;
};

}  // namespace flashq::cuda
