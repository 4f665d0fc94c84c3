#include <algorithm>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"
#include "kernels/cuda/moe_experts.h"
#include "kernels/cuda/mxfp4.cuh"

namespace flashq::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr unsigned kThreads = 256;

__device__ inline float activate(float g, float u, ExpertActivation a) {
  if (a.kind == ExpertActivationKind::kSwiglu) return silu_times(g, u);
  g = fminf(g, a.limit);
  u = fminf(fmaxf(u, -a.limit), a.limit);
  return (u + 1.0f) * (g / (1.0f + expf(-a.alpha * g)));
}

// act[s, c] for every slot s routed to `expert`: warp per intermediate column c.
__global__ void expert_gate_up(const float* __restrict__ x, const int32_t* __restrict__ ids, MoeShape shape,
                               int32_t expert, DeviceExpert weights, ExpertActivation activation,
                               float* __restrict__ act) {
  begin_after_previous_grid();
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (c >= shape.intermediate) return;  // the whole warp
  const bool interleaved = weights.gate_up.weight != nullptr;
  for (int64_t s = 0; s < shape.rows * shape.top_k; ++s) {
    if (ids[s] != expert) continue;  // the same for every lane
    const float* row = x + (s / shape.top_k) * shape.hidden;
    const float g =
        interleaved ? warp_linear_row(weights.gate_up, 2 * c, row, lane) : warp_linear_row(weights.gate, c, row, lane);
    const float u = interleaved ? warp_linear_row(weights.gate_up, 2 * c + 1, row, lane)
                                : warp_linear_row(weights.up, c, row, lane);
    if (lane == 0) act[s * shape.intermediate + c] = activate(g, u, activation);
  }
}

// down[s, h] for every slot s routed to `expert`: warp per output h.
__global__ void expert_down(const float* __restrict__ act, const int32_t* __restrict__ ids, MoeShape shape,
                            int32_t expert, DeviceLinear weights, float* __restrict__ down) {
  begin_after_previous_grid();
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (h >= shape.hidden) return;
  for (int64_t s = 0; s < shape.rows * shape.top_k; ++s) {
    if (ids[s] != expert) continue;
    const float sum = warp_linear_row(weights, h, act + s * shape.intermediate, lane);
    if (lane == 0) down[s * shape.hidden + h] = sum;
  }
}

// out[m, h] = sum over slots j in order of weights[m, j] * down[m * top_k + j, h]; a slot whose id
// is outside [0, experts) was never computed: it is reported and left out.
__global__ void combine_slots(const float* __restrict__ down, const int32_t* __restrict__ ids,
                              const float* __restrict__ weights, MoeShape shape, int64_t experts,
                              float* __restrict__ out, DeviceErrorReport* report) {
  begin_after_previous_grid();
  const int64_t count = shape.rows * shape.hidden;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = i / shape.hidden, h = i % shape.hidden;
    float sum = 0.0f;
    for (int64_t j = 0; j < shape.top_k; ++j) {
      const int64_t s = m * shape.top_k + j;
      if (ids[s] < 0 || ids[s] >= experts) {
        report_device_error(report, kExpertIdOutsideRange, ids[s], experts);
        continue;
      }
      sum += weights[s] * down[s * shape.hidden + h];
    }
    out[i] = sum;
  }
}

unsigned warp_blocks(int64_t warps) { return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

size_t moe_experts_scratch_bytes(const MoeShape& shape) {
  return static_cast<size_t>(shape.rows * shape.top_k * (shape.intermediate + shape.hidden)) * sizeof(float);
}

void moe_experts(const float* x, const int32_t* ids, const float* weights, const MoeShape& shape,
                 std::span<const DeviceExpert> experts, const ExpertActivation& activation, void* scratch, float* out,
                 DeviceErrorReport* report, cudaStream_t stream) {
  if (shape.rows == 0) return;
  float* act = static_cast<float*>(scratch);
  float* down = act + shape.rows * shape.top_k * shape.intermediate;
  const unsigned threads = kWarpsPerBlock * kWarpSize;
  for (size_t e = 0; e < experts.size(); ++e) {
    launch_kernel("moe_experts (gate, up)", expert_gate_up, warp_blocks(shape.intermediate), threads, 0, stream, x, ids,
                  shape, static_cast<int32_t>(e), experts[e], activation, act);
    launch_kernel("moe_experts (down)", expert_down, warp_blocks(shape.hidden), threads, 0, stream, act, ids, shape,
                  static_cast<int32_t>(e), experts[e].down, down);
  }
  const int64_t count = shape.rows * shape.hidden;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 65535));
  launch_kernel("moe_experts (sum)", combine_slots, blocks, kThreads, 0, stream, down, ids, weights, shape,
                static_cast<int64_t>(experts.size()), out, report);
}

}  // namespace flashq::cuda
