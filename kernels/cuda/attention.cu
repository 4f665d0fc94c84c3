#include "kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"

namespace flashq::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTile = 64;  // keys scored, softmaxed and accumulated together
constexpr int kLanesPerKey = 8;
constexpr int kKeysPerPass = kThreads / kLanesPerKey;
constexpr int kMaxHeadsPerBlock = 8;
constexpr int kMaxSlots = kMaxHeadsPerBlock * static_cast<int>(kMaxAttentionHeadDim) / kThreads;
// Enough blocks to give every SM of an H100 (132) two, so that a single decode row is spread.
constexpr int64_t kTargetBlocks = 264;
constexpr int64_t kMinSliceKeys = kTile;

// The grid depends only on the shape (rows, heads, the most keys a row may have), never on the
// key counts, which live on the device: a captured launch stays right as the caches fill.
struct Plan {
  int64_t heads_per_block, head_groups, slices;
};

// Query heads per block: the largest divisor of the group size (q_heads / kv_heads) up to 8, so
// that a block's heads share one KV head.
Plan plan_for(const AttentionShape& s) {
  const int64_t group = s.q_heads / s.kv_heads;
  int64_t heads = 1;
  for (int64_t h = std::min<int64_t>(group, kMaxHeadsPerBlock); h >= 1; --h) {
    if (group % h == 0) {
      heads = h;
      break;
    }
  }
  const int64_t head_groups = s.q_heads / heads;
  const int64_t blocks_per_slice = s.rows * head_groups;
  const int64_t most_slices = std::max<int64_t>(1, (s.keys + kMinSliceKeys - 1) / kMinSliceKeys);
  const int64_t wanted = (kTargetBlocks + blocks_per_slice - 1) / blocks_per_slice;
  const int64_t slices = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(most_slices, 65535));
  return {heads, head_groups, slices};
}

// Keys per slice for a row of `count` keys: its keys spread over the plan's slices, at least a
// tile each, so a short row uses few slices and a long one all of them.
__host__ __device__ inline int64_t slice_keys_for(int64_t count, const Plan& plan) {
  const int64_t spread = (count + plan.slices - 1) / plan.slices;
  return spread > kMinSliceKeys ? spread : kMinSliceKeys;
}

// Passed by value as a __grid_constant__ parameter: read in place, never copied per thread.
struct KvChunkTable {
  KvChunk chunk[kMaxKvChunks];
  int count;
};

// The chunk holding query row m (chunks are in row order; a block looks it up once).
__device__ inline const KvChunk& chunk_of(const KvChunkTable& table, int64_t m) {
  int c = 0;
  while (c + 1 < table.count && m >= table.chunk[c + 1].first_row) ++c;
  return table.chunk[c];
}

__device__ inline int64_t clamped_count(const int32_t* key_counts, int64_t m, int64_t keys, bool reporter,
                                        DeviceErrorReport* report) {
  int64_t count = key_counts[m];
  if (count > keys) {
    if (reporter) report_device_error(report, kKeyCountBeyondKeys, key_counts[m], keys);
    count = keys;
  }
  return count;
}

// grid (rows, head groups, slices). With one slice the block writes the normalised result to
// `out`; with several it writes its unnormalised sum, running max and total to the partials.
__global__ void __launch_bounds__(kThreads)
    attend_slice(const float* __restrict__ q, const __grid_constant__ KvChunkTable table,
                 const int32_t* __restrict__ key_counts, float* __restrict__ out, float* __restrict__ partial_out,
                 float* __restrict__ partial_stats, AttentionShape s, Plan plan, float scale,
                 DeviceErrorReport* report) {
  __shared__ float q_tile[kMaxHeadsPerBlock][kMaxAttentionHeadDim];
  __shared__ float scores[kMaxHeadsPerBlock][kTile];
  __shared__ float running_max[kMaxHeadsPerBlock], running_total[kMaxHeadsPerBlock], correction[kMaxHeadsPerBlock];

  const int64_t m = blockIdx.x, group = blockIdx.y, slice = blockIdx.z;
  const int heads = static_cast<int>(plan.heads_per_block);
  const int64_t first_head = group * heads;
  const int64_t kv_head = first_head / (s.q_heads / s.kv_heads);
  const int64_t d_count = s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const KvChunk& chunk = chunk_of(table, m);
  const float* __restrict__ k = chunk.k;
  const float* __restrict__ v = chunk.v;
  const int64_t count = clamped_count(key_counts, m, chunk.keys, group == 0 && slice == 0 && threadIdx.x == 0, report);
  const int64_t slice_keys = slice_keys_for(count, plan);
  const int64_t begin = slice * slice_keys, end = min(count, begin + slice_keys);
  if (plan.slices > 1 && begin >= end) return;  // the merge reads only slices holding keys

  for (int64_t i = threadIdx.x; i < heads * d_count; i += kThreads) {
    const int64_t h = i / d_count, d = i % d_count;
    q_tile[h][d] = q[(m * s.q_heads + first_head + h) * d_count + d] * scale;
  }
  if (threadIdx.x < kMaxHeadsPerBlock) {
    running_max[threadIdx.x] = -INFINITY;
    running_total[threadIdx.x] = 0.0f;
  }
  // Thread t owns output slots t, t + kThreads, ...: slot = head * D + d.
  const int slots = static_cast<int>((heads * d_count + kThreads - 1) / kThreads);
  float acc[kMaxSlots];
#pragma unroll
  for (int i = 0; i < kMaxSlots; ++i) acc[i] = 0.0f;
  __syncthreads();

  const int key_in_pass = static_cast<int>(threadIdx.x) / kLanesPerKey,
            sub = static_cast<int>(threadIdx.x) % kLanesPerKey;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t tile = begin; tile < end; tile += kTile) {
    const int tile_keys = static_cast<int>(min(static_cast<int64_t>(kTile), end - tile));
    // Scores: eight lanes per key, each taking every eighth element, then a three-step sum.
    for (int t = key_in_pass; t < kTile; t += kKeysPerPass) {
      float dot[kMaxHeadsPerBlock];
#pragma unroll
      for (int h = 0; h < kMaxHeadsPerBlock; ++h) dot[h] = 0.0f;
      if (t < tile_keys) {
        const float* kt = k + (tile + t) * kv_stride + kv_head * d_count;
        for (int64_t d = sub; d < d_count; d += kLanesPerKey) {
          const float kd = kt[d];
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
      for (int t = lane; t < kTile; t += 32) tile_max = fmaxf(tile_max, scores[warp][t]);
      for (int o = 16; o > 0; o /= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
      const float new_max = fmaxf(running_max[warp], tile_max);  // finite: the tile has a key
      float tile_total = 0.0f;
      for (int t = lane; t < kTile; t += 32) {
        const float p = expf(scores[warp][t] - new_max);  // 0 for the -inf padding
        scores[warp][t] = p;
        tile_total += p;
      }
      for (int o = 16; o > 0; o /= 2) tile_total += __shfl_xor_sync(0xffffffffu, tile_total, o);
      if (lane == 0) {
        const float c = expf(running_max[warp] - new_max);  // 0 for the first tile
        correction[warp] = c;
        running_total[warp] = running_total[warp] * c + tile_total;
        running_max[warp] = new_max;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxSlots; ++i) {
      if (i >= slots) break;
      const int64_t slot = threadIdx.x + static_cast<int64_t>(i) * kThreads;
      if (slot >= heads * d_count) break;
      const int h = static_cast<int>(slot / d_count);
      const int64_t d = slot % d_count;
      const float* vd = v + tile * kv_stride + kv_head * d_count + d;
      float sum = acc[i] * correction[h];
#pragma unroll 8
      for (int t = 0; t < tile_keys; ++t) sum = fmaf(scores[h][t], vd[t * kv_stride], sum);
      acc[i] = sum;
    }
    __syncthreads();  // the next tile overwrites scores
  }

#pragma unroll
  for (int i = 0; i < kMaxSlots; ++i) {
    if (i >= slots) break;
    const int64_t slot = threadIdx.x + static_cast<int64_t>(i) * kThreads;
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

// grid (rows, q_heads): weighs each slice holding keys by exp(its max - the overall max).
__global__ void merge_slices(const __grid_constant__ KvChunkTable table, const int32_t* __restrict__ key_counts,
                             const float* __restrict__ partial_out, const float* __restrict__ partial_stats,
                             float* __restrict__ out, AttentionShape s, Plan plan) {
  const int64_t m = blockIdx.x, head_row = m * s.q_heads + blockIdx.y;
  // attend_slice reports a larger count
  const int64_t count = min(static_cast<int64_t>(key_counts[m]), chunk_of(table, m).keys);
  const int64_t slice_keys = slice_keys_for(count, plan);
  const int64_t used = count > 0 ? (count + slice_keys - 1) / slice_keys : 0;
  const float* stats = partial_stats + head_row * plan.slices * 2;
  float best = -INFINITY;
  for (int64_t i = 0; i < used; ++i) best = fmaxf(best, stats[2 * i]);
  float denominator = 0.0f;
  for (int64_t i = 0; i < used; ++i) denominator += expf(stats[2 * i] - best) * stats[2 * i + 1];
  for (int64_t d = threadIdx.x; d < s.head_dim; d += blockDim.x) {
    float numerator = 0.0f;
    for (int64_t i = 0; i < used; ++i) {
      numerator += expf(stats[2 * i] - best) * partial_out[(head_row * plan.slices + i) * s.head_dim + d];
    }
    out[head_row * s.head_dim + d] = used > 0 ? numerator / denominator : 0.0f;
  }
}

}  // namespace

size_t attention_scratch_bytes(const AttentionShape& shape) {
  if (shape.rows == 0 || shape.q_heads == 0 || shape.head_dim == 0) return 0;
  const Plan plan = plan_for(shape);
  if (plan.slices == 1) return 0;
  const auto head_rows = static_cast<size_t>(shape.rows * shape.q_heads * plan.slices);
  return head_rows * static_cast<size_t>(shape.head_dim + 2) * sizeof(float);
}

void attention(const float* q, std::span<const KvChunk> chunks, const int32_t* key_counts, float* out,
               AttentionShape shape, void* scratch, DeviceErrorReport* report, cudaStream_t stream) {
  if (shape.rows == 0 || shape.q_heads == 0 || shape.head_dim == 0 || chunks.empty()) return;
  if (chunks.size() > static_cast<size_t>(kMaxKvChunks)) {
    throw Error(ErrorCode::kInternal, "attention: more chunks than one launch takes");
  }
  KvChunkTable table{};
  std::copy(chunks.begin(), chunks.end(), table.chunk);
  table.count = static_cast<int>(chunks.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const Plan plan = plan_for(shape);
  auto* partial_out = static_cast<float*>(scratch);
  float* partial_stats =
      plan.slices == 1 ? nullptr : partial_out + shape.rows * shape.q_heads * plan.slices * shape.head_dim;
  const dim3 grid(static_cast<unsigned>(shape.rows), static_cast<unsigned>(plan.head_groups),
                  static_cast<unsigned>(plan.slices));
  attend_slice<<<grid, kThreads, 0, stream>>>(q, table, key_counts, out, partial_out, partial_stats, shape, plan, scale,
                                              report);
  check_launch("attention");
  if (plan.slices == 1) return;
  merge_slices<<<dim3(static_cast<unsigned>(shape.rows), static_cast<unsigned>(shape.q_heads)), 128, 0, stream>>>(
      table, key_counts, partial_out, partial_stats, out, shape, plan);
  check_launch("attention (merge slices)");
}

}  // namespace flashq::cuda
