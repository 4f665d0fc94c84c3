// Attention for a tile of query vectors (consecutive rows of one chunk times the query heads of
// one KV head) over one slice of the keys, staged through shared memory: the block loads 32
// keys and their values at a time with 16-byte loads (8-byte from a bf16 cache, widened to
// float32 in shared memory), all issued together, then scores every query vector against them,
// softmaxes online and accumulates the values. Two sizes:
//  - 64 query vectors (verify and draft blocks, prefill): each key and value is read once for
//    the tile's rows, where a block a row reads it once a row;
//  - 8 (decode: one row's heads): a slice's loads are in flight at once, where the one-row
//    kernel (attend_row.cuh) walks them in a chain of dependent loads.
// Head dim a multiple of 4 and every address 16-byte aligned. Included by attention.cu only.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_split.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kv_element.cuh"

namespace flashq::cuda {

inline constexpr int kTileThreads = 256;
inline constexpr int kTileWarps = kTileThreads / kWarpSize;
inline constexpr int kKeyTile = kWarpSize;  // the softmax takes a lane per key
inline constexpr int kScoreStride = kKeyTile + 1;  // 32 queries writing one key: no bank conflicts
inline constexpr int kBlockQueries = 64;           // the row-tile size
inline constexpr int kDecodeQueries = 8;           // the decode size
inline constexpr int kQueriesPerGroup = 8;         // row tiles: a thread's queries in the value sums

// Shared memory of attend_tile, in floats: the scaled queries (rows padded by 4 floats, so that
// the 8 lanes of a 16-byte load phase reading 8 queries hit different banks), one tile of keys
// and one of values, and the scores (rows padded by 1).
struct TileLayout {
  int64_t head_dim, queries;
  __host__ __device__ int64_t query_stride() const { return head_dim + 4; }
  __host__ __device__ int64_t keys_at() const { return queries * query_stride(); }
  __host__ __device__ int64_t values_at() const { return keys_at() + kKeyTile * head_dim; }
  __host__ __device__ int64_t scores_at() const { return values_at() + kKeyTile * head_dim; }
  __host__ __device__ size_t bytes() const {
    return static_cast<size_t>(scores_at() + queries * kScoreStride) * sizeof(float);
  }
};

// Output elements a thread sums: row tiles, 8 queries x 4 elements an item, D / 128 items
// (rounded up); decode, single (query, element) slots, 8 x D / 256 of them.
template <int kQueries>
constexpr int accumulators_for(int64_t head_dim) {
  return kQueries == kBlockQueries ? static_cast<int>((head_dim + 127) / 128)
                                   : static_cast<int>((kQueries * head_dim + kTileThreads - 1) / kTileThreads);
}

__device__ inline float4 scaled(float4 a, float c) { return make_float4(a.x * c, a.y * c, a.z * c, a.w * c); }

__device__ inline float4 plus_times(float4 acc, float p, float4 v) {
  return make_float4(fmaf(p, v.x, acc.x), fmaf(p, v.y, acc.y), fmaf(p, v.z, acc.z), fmaf(p, v.w, acc.w));
}

// grid (tiles, head groups, slices). With one slice the block writes the normalised result to
// `out`; with several it writes its unnormalised sums, running max and total to the partials,
// and the last of a tile's slices to finish merges them into `out` (counted in
// slice_counters[tile * head groups + group], which it leaves at zero for the next launch).
// The slice's keys follow the tile's longest row; a causal row stops at its own count.
// kAccumulators: accumulators_for<kQueries>(head_dim) or more. Kv: the caches' element type
// (kv_element.cuh), widened to float32 on its way into shared memory.
template <int kQueries, int kAccumulators, typename Kv>
__global__ void __launch_bounds__(kTileThreads)
    attend_tile(const float* __restrict__ q, const __grid_constant__ KvChunkTable table,
                const int32_t* __restrict__ key_counts, float* __restrict__ out, float* __restrict__ partial_out,
                float* __restrict__ partial_stats, int32_t* __restrict__ slice_counters, AttentionShape s,
                AttentionPlan plan, float scale, DeviceErrorReport* report) {
  constexpr int kKeyLanes = kTileThreads / kQueries;  // threads scoring one query
  constexpr int kKeysPerThread = kKeyTile / kKeyLanes;
  static_assert(kKeyLanes * kKeysPerThread == kKeyTile && kQueries * kKeyLanes == kTileThreads);
  constexpr bool kRowTiles = kQueries == kBlockQueries;

  extern __shared__ float4 tile_memory[];
  __shared__ float running_max[kQueries], running_total[kQueries], correction[kQueries];
  __shared__ int64_t row_keys[kQueries];
  __shared__ bool merges;
  begin_after_previous_grid();

  const TileLayout layout{s.head_dim, kQueries};
  float* const queries_s = reinterpret_cast<float*>(tile_memory);
  float4* const keys4 = reinterpret_cast<float4*>(queries_s + layout.keys_at());
  float4* const values4 = reinterpret_cast<float4*>(queries_s + layout.values_at());
  const float* const values_s = queries_s + layout.values_at();
  float* const scores_s = queries_s + layout.scores_at();

  const RowTile tile = tile_at(table, s.rows, blockIdx.x, plan.rows_per_tile);
  const KvChunk& chunk = table.chunk[tile.chunk];
  const int64_t group = blockIdx.y, slice = blockIdx.z;
  const int heads = static_cast<int>(plan.heads_per_block);
  const int64_t first_head = group * heads, kv_head = first_head / (s.q_heads / s.kv_heads);
  const int64_t kv_stride = s.kv_heads * s.head_dim;
  const int d_count = static_cast<int>(s.head_dim), d4 = d_count / 4;
  const int tile_rows = static_cast<int>(tile.end - tile.begin), queries = tile_rows * heads;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarpSize, lane = tid % kWarpSize;
  // Query vector i is row tile.begin + i / heads, head first_head + i % heads.
  auto head_row_of = [&](int i) { return (tile.begin + i / heads) * s.q_heads + first_head + i % heads; };

  if (tid < tile_rows) {
    row_keys[tid] = visible_count(key_counts, tile.begin + tid, chunk.keys, group == 0 && slice == 0, report);
  }
  if (tid < kQueries) {
    running_max[tid] = -INFINITY;
    running_total[tid] = 0.0f;
    correction[tid] = 1.0f;
  }
  // Scores of query vectors beyond `queries` stay 0: their sums are computed and never written.
  for (int i = tid; i < kQueries * kScoreStride; i += kTileThreads) scores_s[i] = 0.0f;
  for (int i = tid; i < queries * d4; i += kTileThreads) {
    const int query = i / d4, c = i % d4;
    const float4 value = reinterpret_cast<const float4*>(q + head_row_of(query) * s.head_dim)[c];
    reinterpret_cast<float4*>(queries_s + query * layout.query_stride())[c] = scaled(value, scale);
  }
  __syncthreads();
  int64_t tile_count = 0;
  for (int r = 0; r < tile_rows; ++r) tile_count = max(tile_count, row_keys[r]);
  const int64_t slice_keys = slice_keys_for(tile_count, plan);
  const int64_t key_begin = slice * slice_keys, key_end = min(tile_count, key_begin + slice_keys);
  if (plan.slices > 1 && key_begin >= key_end) {
    // The merge reads only slices holding keys. With none (no row of the tile sees a key), no
    // block merges: slice 0 writes the zeros.
    if (tile_count == 0 && slice == 0) {
      for (int i = tid; i < queries * d_count; i += kTileThreads) {
        out[head_row_of(i / d_count) * s.head_dim + i % d_count] = 0.0f;
      }
    }
    return;
  }

  // Row tiles: item w sums queries 8g .. 8g + 7, elements 4c .. 4c + 3 of each (g = w / d4,
  // c = w % d4). Decode: slot w sums query w / D, element w % D.
  float4 group_sums[kRowTiles ? kAccumulators : 1][kQueriesPerGroup];
  float slot_sums[kRowTiles ? 1 : kAccumulators];
#pragma unroll
  for (int a = 0; a < kAccumulators; ++a) {
    if constexpr (kRowTiles) {
#pragma unroll
      for (int i = 0; i < kQueriesPerGroup; ++i) group_sums[a][i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    } else {
      slot_sums[a] = 0.0f;
    }
  }
  const int score_query = tid % kQueries, key_lane = tid / kQueries;

  for (int64_t first_key = key_begin; first_key < key_end; first_key += kKeyTile) {
    const int tile_keys = static_cast<int>(min(static_cast<int64_t>(kKeyTile), key_end - first_key));
    // Keys and values of the tile, zeros past its end.
    for (int i = tid; i < kKeyTile * d4; i += kTileThreads) {
      const int key = i / d4, c = i % d4;
      float4 k4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v4 = k4;
      if (key < tile_keys) {
        const int64_t at = (first_key + key) * kv_stride + kv_head * s.head_dim;
        k4 = read_kv4(static_cast<const Kv*>(chunk.k) + at, c);
        v4 = read_kv4(static_cast<const Kv*>(chunk.v) + at, c);
      }
      keys4[i] = k4;
      values4[i] = v4;
    }
    __syncthreads();
    // Scores: a thread takes keys key_lane, key_lane + kKeyLanes, ... of one query; the lanes of
    // a 16-byte load phase share their keys (broadcast reads).
    if (score_query < queries) {
      float dot[kKeysPerThread];
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) dot[j] = 0.0f;
      const float4* query4 = reinterpret_cast<const float4*>(queries_s + score_query * layout.query_stride());
      for (int c = 0; c < d4; ++c) {
        const float4 a = query4[c];
#pragma unroll
        for (int j = 0; j < kKeysPerThread; ++j) {
          const float4 b = keys4[(key_lane + j * kKeyLanes) * d4 + c];
          dot[j] = fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, dot[j]))));
        }
      }
      const int64_t visible = row_keys[score_query / heads] - first_key;  // keys of this tile the row sees
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) {
        const int key = key_lane + j * kKeyLanes;
        scores_s[score_query * kScoreStride + key] = key < tile_keys && key < visible ? dot[j] : -INFINITY;
      }
    }
    __syncthreads();
    // Online softmax: warp w takes queries w, w + 8, ..., a lane per key.
    for (int query = warp; query < queries; query += kTileWarps) {
      float* row = scores_s + query * kScoreStride;
      const float score = row[lane];
      const float new_max = fmaxf(running_max[query], warp_max(score));
      // -inf until the row has seen a key: nothing to weigh or rescale yet.
      const float weight = new_max == -INFINITY ? 0.0f : expf(score - new_max);
      row[lane] = weight;
      const float total = warp_sum(weight);
      if (lane == 0) advance_softmax(running_max[query], running_total[query], correction[query], new_max, total);
    }
    __syncthreads();
    // Values. Row tiles: a warp's lanes share their 8 queries (broadcast reads of the weights)
    // and read adjacent values. Decode: a lane per element, a warp's lanes sharing the query.
#pragma unroll
    for (int a = 0; a < kAccumulators; ++a) {
      const int w = tid + a * kTileThreads;
      if constexpr (kRowTiles) {
        const int g = w / d4, c = w % d4;
        if (g * kQueriesPerGroup >= queries) continue;
        const float* weights = scores_s + g * kQueriesPerGroup * kScoreStride;
#pragma unroll
        for (int i = 0; i < kQueriesPerGroup; ++i) {
          group_sums[a][i] = scaled(group_sums[a][i], correction[g * kQueriesPerGroup + i]);
        }
        for (int key = 0; key < tile_keys; ++key) {
          const float4 v = values4[key * d4 + c];
#pragma unroll
          for (int i = 0; i < kQueriesPerGroup; ++i) {
            group_sums[a][i] = plus_times(group_sums[a][i], weights[i * kScoreStride + key], v);
          }
        }
      } else {
        const int query = w / d_count, d = w % d_count;
        if (query >= queries) continue;
        const float* weights = scores_s + query * kScoreStride;
        float sum = slot_sums[a] * correction[query];
#pragma unroll 8
        for (int key = 0; key < tile_keys; ++key) sum = fmaf(weights[key], values_s[key * d_count + d], sum);
        slot_sums[a] = sum;
      }
    }
    __syncthreads();  // the next tile overwrites keys, values and scores
  }

  // Writes element group `c` (4 floats) or element `d` of query vector `query`.
  auto write = [&](int query, int64_t first_element, const float* sums, int count) {
    const int64_t head_row = head_row_of(query);
    float* to = plan.slices == 1 ? out + head_row * s.head_dim
                                 : partial_out + (head_row * plan.slices + slice) * s.head_dim;
    const float factor = plan.slices > 1 ? 1.0f : row_keys[query / heads] > 0 ? 1.0f / running_total[query] : 0.0f;
    for (int e = 0; e < count; ++e) to[first_element + e] = sums[e] * factor;
  };
#pragma unroll
  for (int a = 0; a < kAccumulators; ++a) {
    const int w = tid + a * kTileThreads;
    if constexpr (kRowTiles) {
      const int g = w / d4, c = w % d4;
#pragma unroll
      for (int i = 0; i < kQueriesPerGroup; ++i) {
        const int query = g * kQueriesPerGroup + i;
        if (query >= queries) break;
        const float4 sum = group_sums[a][i];
        const float four[4] = {sum.x, sum.y, sum.z, sum.w};
        write(query, 4 * c, four, 4);
      }
    } else {
      const int query = w / d_count, d = w % d_count;
      if (query < queries) write(query, d, &slot_sums[a], 1);
    }
  }
  if (plan.slices == 1) return;
  if (tid < queries) {
    const int64_t at = (head_row_of(tid) * plan.slices + slice) * 2;
    partial_stats[at] = running_max[tid];
    partial_stats[at + 1] = running_total[tid];
  }

  // The `used` slices holding keys each count themselves in once their partials are out; the
  // last to count merges them all, a launch fewer than a separate merge kernel.
  const int64_t used = (tile_count + slice_keys - 1) / slice_keys;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    int32_t* counter = slice_counters + blockIdx.x * gridDim.y + blockIdx.y;
    merges = atomicAdd(counter, 1) + 1 == used;
    if (merges) atomicExch(counter, 0);
  }
  __syncthreads();
  if (!merges) return;
  __threadfence();
  for (int query = warp; query < queries; query += kTileWarps) {
    merge_query_slices(partial_out, partial_stats, out, head_row_of(query), used, row_keys[query / heads] > 0,
                       plan.slices, s.head_dim, lane, kWarpSize);
  }
}

}  // namespace flashq::cuda
