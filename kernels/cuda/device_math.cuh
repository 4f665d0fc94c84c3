// Small device helpers shared by the kernels: widening a weight element of any dtype, and
// warp and block sums. Reductions are written out in a fixed order so a result never depends
// on which other rows share a launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace flashq::cuda {

inline constexpr int kWarpSize = 32;

// Whether p suits 16-byte (float4, uint4) loads; the launchers pick their vector kernels by it.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__device__ inline float widen(float v) { return v; }
__device__ inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float widen(__half v) { return __half2float(v); }

// Element i of a weight vector stored as f32, bf16 or f16 (norm weights, embedding rows).
__device__ inline float weight_at(const void* w, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16: return widen(static_cast<const __nv_bfloat16*>(w)[i]);
    case DType::kF16: return widen(static_cast<const __half*>(w)[i]);
    default: return static_cast<const float*>(w)[i];
  }
}

// SwiGLU's element: silu(g) * u. One definition for the swiglu kernel and the fused MLP
// product, so the two give the same bits.
__device__ inline float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Butterfly sum: every lane ends with the same total.
__device__ inline float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Butterfly max: every lane ends with the same maximum.
__device__ inline float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
// Uses `scratch` (32 floats of shared memory); call once per kernel.
__device__ inline float block_sum(float v, float* scratch) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x) / kWarpSize;
    float partial = lane < warps ? scratch[lane] : 0.0f;
    partial = warp_sum(partial);
    if (lane == 0) scratch[kWarpSize - 1] = partial;
  }
  __syncthreads();
  return scratch[kWarpSize - 1];
}

// Sum over the block by halving (blockDim.x a power of two, `partials` blockDim.x floats of shared
// memory); every thread gets the total, and the block may call it again at once (it syncs before
// returning), as a kernel normalising row after row does.
__device__ inline float repeatable_block_sum(float x, float* partials) {
  partials[threadIdx.x] = x;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partials[threadIdx.x] += partials[threadIdx.x + half];
    __syncthreads();
  }
  const float sum = partials[0];
  __syncthreads();
  return sum;
}

}  // namespace flashq::cuda
