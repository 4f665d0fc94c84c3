// A mixture-of-experts layer's experts on the GPU (twin: kernels/cpu/moe_experts.cpp), as
// Backend::moe_experts states (kernels/backend.h). The ids stay on the device, so a pass with it
// can be captured in a CUDA graph; it is simple rather than fast:
//   for each expert e, one launch over its intermediate columns (a warp per column) that, for
//   every (row, slot) whose id is e, forms gate and up and the activation into `act`; then one
//   launch over its outputs (a warp per output) for the down products into `down`; then one
//   launch for the weighted sum of each row's slots, which also reports ids outside [0, E).
// Each warp scans the rows' ids and reads its weight row only where some row routes to e (once
// from memory, again from cache for further rows), so an expert no row chose costs its two
// launches and the scan, not its weights. Cost: 2E + 1 launches per call (257 for 128 experts),
// and every element decoded on its own (kernels/cuda/mxfp4.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cuda/device_error.h"
#include "kernels/cuda/device_linear.h"
#include "kernels/moe.h"

namespace flashq::cuda {

struct DeviceExpert {
  DeviceLinear gate, up, gate_up, down;  // gate_up's weight non-null: interleaved
};

struct MoeShape {
  int64_t rows = 0, top_k = 0, hidden = 0, intermediate = 0;
};

// Bytes of scratch moe_experts needs: the activation [rows * top_k, intermediate] and the down
// products [rows * top_k, hidden], float32.
size_t moe_experts_scratch_bytes(const MoeShape& shape);

// `experts` is read on the host (each expert's pointers are launch arguments). Allocates nothing.
void moe_experts(const float* x, const int32_t* ids, const float* weights, const MoeShape& shape,
                 std::span<const DeviceExpert> experts, const ExpertActivation& activation, void* scratch, float* out,
                 DeviceErrorReport* report, cudaStream_t stream);

}  // namespace flashq::cuda
