// The one-row attention kernel: any head dim, any alignment. attention() (attention.cu) takes
// it when the float4 kernels of attend_tile.cuh do not suit the shape or the addresses.
// Included by attention.cu only.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_split.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kv_element.cuh"

namespace flashq::cuda {

inline constexpr int kRowThreads = 256;
inline constexpr int kRowKeyTile = 64;  // keys scored, softmaxed and accumulated together
inline constexpr int kLanesPerKey = 8;
inline constexpr int kKeysPerPass = kRowThreads / kLanesPerKey;
inline constexpr int kMaxHeadsPerBlock = 8;
inline constexpr int kMaxSlots = kMaxHeadsPerBlock * static_cast<int>(kMaxAttentionHeadDim) / kRowThreads;

// One row a block, grid (rows, head groups, slices). With one slice the block writes the
// normalised result to `out`; with several it writes its unnormalised sum, running max and
// total to the partials. Kv: the caches' element type (kv_element.cuh).
template <typename Kv>
__global__ void __launch_bounds__(kRowThreads)
    attend_row(const float* __restrict__ q, const __grid_constant__ KvChunkTable table,
               const int32_t* __restrict__ key_counts, float* __restrict__ out, float* __restrict__ partial_out,
               float* __restrict__ partial_stats, AttentionShape s, AttentionPlan plan, float scale,
               DeviceErrorReport* report) {
  __shared__ float q_tile[kMaxHeadsPerBlock][kMaxAttentionHeadDim];
  __shared__ float scores[kMaxHeadsPerBlock][kRowKeyTile];
  __shared__ float running_max[kMaxHeadsPerBlock], running_total[kMaxHeadsPerBlock], correction[kMaxHeadsPerBlock];
  begin_after_previous_grid();

  const int64_t m = blockIdx.x, group = blockIdx.y, slice = blockIdx.z;
  const int heads = static_cast<int>(plan.heads_per_block);
  const int64_t first_head = group * heads;
  const int64_t kv_head = first_head / (s.q_heads / s.kv_heads);
  const int64_t d_count = s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const KvChunk& chunk = table.chunk[chunk_index_of(table, m)];
  const Kv* __restrict__ k = static_cast<const Kv*>(chunk.k);
  const Kv* __restrict__ v = static_cast<const Kv*>(chunk.v);
  const int64_t count = visible_count(key_counts, m, chunk.keys, group == 0 && slice == 0 && threadIdx.x == 0, report);
  const int64_t slice_keys = slice_keys_for(count, plan);
  const int64_t begin = slice * slice_keys, end = min(count, begin + slice_keys);
  if (plan.slices > 1 && begin >= end) return;  // the merge reads only slices holding keys

  for (int64_t i = threadIdx.x; i < heads * d_count; i += kRowThreads) {
    const int64_t h = i / d_count, d = i % d_count;
    q_tile[h][d] = q[(m * s.q_heads + first_head + h) * d_count + d] * scale;
  }
  if (threadIdx.x < kMaxHeadsPerBlock) {
    running_max[threadIdx.x] = -INFINITY;
    running_total[threadIdx.x] = 0.0f;
  }
  // Thread t owns output slots t, t + kRowThreads, ...: slot = head * D + d.
  const int slots = static_cast<int>((heads * d_count + kRowThreads - 1) / kRowThreads);
  float acc[kMaxSlots];
#pragma unroll
  for (int i = 0; i < kMaxSlots; ++i) acc[i] = 0.0f;
  __syncthreads();

  const int key_in_pass = static_cast<int>(threadIdx.x) / kLanesPerKey,
            sub = static_cast<int>(threadIdx.x) % kLanesPerKey;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t tile = begin; tile < end; tile += kRowKeyTile) {
    const int tile_keys = static_cast<int>(min(static_cast<int64_t>(kRowKeyTile), end - tile));
    // Scores: eight lanes per key, each taking every eighth element, then a three-step sum.
    for (int t = key_in_pass; t < kRowKeyTile; t += kKeysPerPass) {
      float dot[kMaxHeadsPerBlock];
#pragma unroll
      for (int h = 0; h < kMaxHeadsPerBlock; ++h) dot[h] = 0.0f;
      if (t < tile_keys) {
        const Kv* kt = k + (tile + t) * kv_stride + kv_head * d_count;
        for (int64_t d = sub; d < d_count; d += kLanesPerKey) {
          const float kd = read_kv(kt, d);
#pragma unroll
          for (int h = 0; h < kMaxHeadsPerBlock; ++h) {
            if (h < heads) dot[h] = fmaf(q_tile[h][d], kd, dot[h]);
          }
        }
      }
#pragma unroll
      for (int h = 0; h < kMaxHeadsPerBlock; ++h) {
        for (int o = kLanesPerKey / 2; o > 0; o /= 2) dot[h] += __shfl_xor_sync(0xffffffffu, dot[h], o);
        if (sub == 0 && h < heads) scores[h][t] = t < tile_keys ? dot[h] : -INFINITY;
      }
    }
    __syncthreads();
    // Softmax over the tile: warp h rescales head h's running state.
    if (warp < heads) {
      float tile_max = -INFINITY;
      for (int t = lane; t < kRowKeyTile; t += 32) tile_max = fmaxf(tile_max, scores[warp][t]);
      for (int o = 16; o > 0; o /= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
      const float new_max = fmaxf(running_max[warp], tile_max);  // finite: the tile has a key
      float tile_total = 0.0f;
      for (int t = lane; t < kRowKeyTile; t += 32) {
        const float p = expf(scores[warp][t] - new_max);  // 0 for the -inf padding
        scores[warp][t] = p;
        tile_total += p;
      }
      for (int o = 16; o > 0; o /= 2) tile_total += __shfl_xor_sync(0xffffffffu, tile_total, o);
      if (lane == 0) advance_softmax(running_max[warp], running_total[warp], correction[warp], new_max, tile_total);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxSlots; ++i) {
      if (i >= slots) break;
      const int64_t slot = threadIdx.x + static_cast<int64_t>(i) * kRowThreads;
      if (slot >= heads * d_count) break;
      const int h = static_cast<int>(slot / d_count);
      const int64_t d = slot % d_count;
      const Kv* vd = v + tile * kv_stride + kv_head * d_count + d;
      float sum = acc[i] * correction[h];
#pragma unroll 8
      for (int t = 0; t < tile_keys; ++t) sum = fmaf(scores[h][t], read_kv(vd, t * kv_stride), sum);
      acc[i] = sum;
    }
    __syncthreads();  // the next tile overwrites scores
  }

#pragma unroll
  for (int i = 0; i < kMaxSlots; ++i) {
    if (i >= slots) break;
    const int64_t slot = threadIdx.x + static_cast<int64_t>(i) * kRowThreads;
    if (slot >= heads * d_count) break;
    const int64_t h = slot / d_count, d = slot % d_count;
    const int64_t head_row = m * s.q_heads + first_head + h;
    if (plan.slices == 1) {
      out[head_row * d_count + d] = count > 0 ? acc[i] / running_total[h] : 0.0f;
    } else {
      partial_out[(head_row * plan.slices + slice) * d_count + d] = acc[i];
      if (d == 0) {
        partial_stats[(head_row * plan.slices + slice) * 2] = running_max[h];
        partial_stats[(head_row * plan.slices + slice) * 2 + 1] = running_total[h];
      }
    }
  }
}


}  // namespace flashq::cuda
