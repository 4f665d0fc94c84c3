#include "kernels/cuda/attention.h"

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace flashq::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = static_cast<int>(kMaxAttentionHeadDim) / kWarpSize;  // head elements per lane

// Lane l holds head elements l, l + 32, ... of q and of the running output.
__global__ void __launch_bounds__(kWarps * kWarpSize)
    attend(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
           const int32_t* __restrict__ key_counts, float* __restrict__ out, AttentionShape s, float scale,
           DeviceErrorReport* report) {
  __shared__ float warp_max[kWarps], warp_total[kWarps];
  __shared__ float warp_out[kWarps][kMaxAttentionHeadDim];
  const int64_t m = blockIdx.x, h = blockIdx.y;  // rows on x: y is limited to 65535
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t kv_head = h / (s.q_heads / s.kv_heads);
  const int64_t kv_stride = s.kv_heads * s.head_dim;  // floats from one key row to the next
  int64_t count = key_counts[m];
  if (count > s.keys) {
    if (threadIdx.x == 0) report_device_error(report, kKeyCountBeyondKeys, key_counts[m], s.keys);
    count = s.keys;
  }

  const float* qh = q + (m * s.q_heads + h) * s.head_dim;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int64_t d = lane + e * kWarpSize;
    qv[e] = d < s.head_dim ? qh[d] : 0.0f;
    acc[e] = 0.0f;
  }
  float running_max = -INFINITY, total = 0.0f;
  for (int64_t t = warp; t < count; t += kWarps) {
    const float* kt = k + t * kv_stride + kv_head * s.head_dim;
    float partial = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int64_t d = lane + e * kWarpSize;
      if (d < s.head_dim) partial = fmaf(qv[e], kt[d], partial);
    }
    const float score = warp_sum(partial) * scale;
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max);  // 0 for the first key
    const float p = expf(score - new_max);
    total = total * correction + p;
    const float* vt = v + t * kv_stride + kv_head * s.head_dim;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int64_t d = lane + e * kWarpSize;
      if (d < s.head_dim) acc[e] = fmaf(p, vt[d], acc[e] * correction);
    }
    running_max = new_max;
  }

  if (lane == 0) {
    warp_max[warp] = running_max;
    warp_total[warp] = total;
  }
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int64_t d = lane + e * kWarpSize;
    if (d < s.head_dim) warp_out[warp][d] = acc[e];
  }
  __syncthreads();

  float* oh = out + (m * s.q_heads + h) * s.head_dim;
  float block_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, warp_max[w]);
  float weights[kWarps], denominator = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    // A warp that saw no key has max -inf and total 0: weight 0 (block_max is finite here).
    weights[w] = count > 0 ? expf(warp_max[w] - block_max) : 0.0f;
    denominator += weights[w] * warp_total[w];
  }
  for (int64_t d = threadIdx.x; d < s.head_dim; d += blockDim.x) {
    if (count <= 0) {
      oh[d] = 0.0f;
      continue;
    }
    float numerator = 0.0f;
    for (int w = 0; w < kWarps; ++w) numerator += weights[w] * warp_out[w][d];
    oh[d] = numerator / denominator;
  }
}

}  // namespace

void attention(const float* q, const float* k, const float* v, const int32_t* key_counts, float* out,
               AttentionShape shape, DeviceErrorReport* report, cudaStream_t stream) {
  if (shape.rows == 0 || shape.q_heads == 0 || shape.head_dim == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const dim3 grid(static_cast<unsigned>(shape.rows), static_cast<unsigned>(shape.q_heads));
  attend<<<grid, kWarps * kWarpSize, 0, stream>>>(q, k, v, key_counts, out, shape, scale, report);
  check_launch("attention");
}

}  // namespace flashq::cuda
