#include "kernels/cuda/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace flashq::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
// One row a block (decode): keys scored, softmaxed and accumulated together, eight lanes a key.
constexpr int kTile = 64;
constexpr int kLanesPerKey = 8;
constexpr int kKeysPerPass = kThreads / kLanesPerKey;
constexpr int kMaxHeadsPerBlock = 8;
constexpr int kMaxSlots = kMaxHeadsPerBlock * static_cast<int>(kMaxAttentionHeadDim) / kThreads;
// Row tiles (verify and draft blocks, prefill): a block's query vectors (rows x heads) share
// every key and value it loads. Scores: each thread 8 keys of one query; values: each thread 8
// queries x 4 elements; softmax: a lane per key.
constexpr int kTileQueries = 64;
constexpr int kKeyTile = kWarpSize;
constexpr int kKeyLanes = kThreads / kTileQueries;
constexpr int kKeysPerThread = kKeyTile / kKeyLanes;
constexpr int kQueriesPerGroup = 8;
constexpr int kScoreStride = kKeyTile + 1;  // a warp writes one key of 32 queries: no bank conflicts
static_assert(kKeysPerThread * kKeyLanes == kKeyTile && kKeyLanes * kTileQueries == kThreads);
// Below this many rows in every chunk (decode), a block a row is the better split.
constexpr int64_t kMinRowsForTiles = 4;
// Enough blocks to give every SM of an H100 (132) two, so that a single decode row is spread.
constexpr int64_t kTargetBlocks = 264;
constexpr int64_t kMinSliceKeys = kTile;

// The grid depends only on the shape (rows per chunk, heads, the most keys a row may have),
// never on the key counts, which live on the device: a captured launch stays right as the
// caches fill. Rows are taken in tiles of rows_per_tile consecutive rows of one chunk (1 for
// the one-row kernel); each tile's keys are spread over the slices.
struct Plan {
  int64_t heads_per_block, head_groups, slices, rows_per_tile, tiles;
};

int64_t rows_of_chunk(std::span<const KvChunk> chunks, size_t c, int64_t total_rows) {
  return (c + 1 < chunks.size() ? chunks[c + 1].first_row : total_rows) - chunks[c].first_row;
}

// Query heads per block: the largest divisor of the group size (q_heads / kv_heads) up to 8, so
// that a block's heads share one KV head.
Plan plan_for(const AttentionShape& s, std::span<const KvChunk> chunks, bool row_tiles) {
  const int64_t group = s.q_heads / s.kv_heads;
  int64_t heads = 1;
  for (int64_t h = std::min<int64_t>(group, kMaxHeadsPerBlock); h >= 1; --h) {
    if (group % h == 0) {
      heads = h;
      break;
    }
  }
  const int64_t rows_per_tile = row_tiles ? kTileQueries / heads : 1;
  int64_t tiles = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    tiles += (rows_of_chunk(chunks, c, s.rows) + rows_per_tile - 1) / rows_per_tile;
  }
  const int64_t head_groups = s.q_heads / heads;
  const int64_t blocks_per_slice = std::max<int64_t>(1, tiles * head_groups);
  const int64_t most_slices = std::max<int64_t>(1, (s.keys + kMinSliceKeys - 1) / kMinSliceKeys);
  const int64_t wanted = (kTargetBlocks + blocks_per_slice - 1) / blocks_per_slice;
  const int64_t slices = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(most_slices, 65535));
  return {heads, head_groups, slices, rows_per_tile, tiles};
}

// A chunk of several rows (a verify or draft block) and float4-ready shapes and addresses.
bool row_tiles_suit(const AttentionShape& s, std::span<const KvChunk> chunks) {
  if (s.head_dim % 4 != 0) return false;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (rows_of_chunk(chunks, c, s.rows) >= kMinRowsForTiles) return true;
  }
  return false;
}

bool aligned_for_float4(const void* p) { return reinterpret_cast<uintptr_t>(p) % sizeof(float4) == 0; }

bool addresses_suit(const float* q, std::span<const KvChunk> chunks, const float* out) {
  if (!aligned_for_float4(q) || !aligned_for_float4(out)) return false;
  return std::all_of(chunks.begin(), chunks.end(),
                     [](const KvChunk& c) { return aligned_for_float4(c.k) && aligned_for_float4(c.v); });
}

// Keys per slice for a tile whose rows see at most `count` keys: spread over the plan's
// slices, at least kMinSliceKeys each, so a short row uses few slices and a long one all.
__host__ __device__ inline int64_t slice_keys_for(int64_t count, const Plan& plan) {
  const int64_t spread = (count + plan.slices - 1) / plan.slices;
  return spread > kMinSliceKeys ? spread : kMinSliceKeys;
}

// Passed by value as a __grid_constant__ parameter: read in place, never copied per thread.
struct KvChunkTable {
  KvChunk chunk[kMaxKvChunks];
  int count;
};

// The chunk holding query row m (chunks are in row order, empty ones skipped).
__device__ inline int chunk_index_of(const KvChunkTable& table, int64_t m) {
  int c = 0;
  while (c + 1 < table.count && m >= table.chunk[c + 1].first_row) ++c;
  return c;
}

__device__ inline const KvChunk& chunk_of(const KvChunkTable& table, int64_t m) {
  return table.chunk[chunk_index_of(table, m)];
}

__device__ inline int64_t end_of_chunk(const KvChunkTable& table, int c, int64_t total_rows) {
  return c + 1 < table.count ? table.chunk[c + 1].first_row : total_rows;
}

// Rows [begin, end) of one chunk, taken by one block.
struct RowTile {
  int chunk;
  int64_t begin, end;
};

// Tiles start at each chunk's first row, rows_per_tile apart; the last of a chunk may be short.
__device__ inline RowTile tile_of_row(const KvChunkTable& table, int64_t total_rows, int64_t m,
                                      int64_t rows_per_tile) {
  const int c = chunk_index_of(table, m);
  const int64_t first = table.chunk[c].first_row;
  const int64_t begin = first + (m - first) / rows_per_tile * rows_per_tile;
  return {c, begin, min(begin + rows_per_tile, end_of_chunk(table, c, total_rows))};
}

// Tile number `index`, counting every chunk's tiles in chunk order (as plan_for does).
__device__ inline RowTile tile_at(const KvChunkTable& table, int64_t total_rows, int64_t index,
                                  int64_t rows_per_tile) {
  for (int c = 0; c < table.count; ++c) {
    const int64_t first = table.chunk[c].first_row, end = end_of_chunk(table, c, total_rows);
    const int64_t tiles = (end - first + rows_per_tile - 1) / rows_per_tile;
    if (index < tiles) {
      const int64_t begin = first + index * rows_per_tile;
      return {c, begin, min(begin + rows_per_tile, end)};
    }
    index -= tiles;
  }
  return {0, 0, 0};  // beyond the plan's tiles: not launched
}

// Keys row m attends: its count, clamped into [0, keys]; one block reports a count beyond.
__device__ inline int64_t visible_count(const int32_t* key_counts, int64_t m, int64_t keys, bool reporter,
                                        DeviceErrorReport* report) {
  const int64_t count = key_counts[m];
  if (count > keys) {
    if (reporter) report_device_error(report, kKeyCountBeyondKeys, key_counts[m], keys);
    return keys;
  }
  return count > 0 ? count : 0;
}

// One row a block, grid (rows, head groups, slices). With one slice the block writes the
// normalised result to `out`; with several it writes its unnormalised sum, running max and
// total to the partials.
__global__ void __launch_bounds__(kThreads)
    attend_row(const float* __restrict__ q, const __grid_constant__ KvChunkTable table,
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
  const int64_t count = visible_count(key_counts, m, chunk.keys, group == 0 && slice == 0 && threadIdx.x == 0, report);
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

// attend_row_tile's shared memory, in floats: the tile's scaled queries (rows padded by 4
// floats, so that the 8 lanes of a 16-byte load phase read different banks), one tile of keys
// and of values, and the scores (rows padded by 1).
struct RowTileLayout {
  int64_t head_dim;
  __host__ __device__ int64_t query_stride() const { return head_dim + 4; }
  __host__ __device__ int64_t keys_at() const { return kTileQueries * query_stride(); }
  __host__ __device__ int64_t values_at() const { return keys_at() + kKeyTile * head_dim; }
  __host__ __device__ int64_t scores_at() const { return values_at() + kKeyTile * head_dim; }
  __host__ __device__ size_t bytes() const {
    return static_cast<size_t>(scores_at() + kTileQueries * kScoreStride) * sizeof(float);
  }
};

__device__ inline float4 scaled(float4 a, float c) { return make_float4(a.x * c, a.y * c, a.z * c, a.w * c); }

__device__ inline float4 plus_times(float4 acc, float p, float4 v) {
  return make_float4(fmaf(p, v.x, acc.x), fmaf(p, v.y, acc.y), fmaf(p, v.z, acc.z), fmaf(p, v.w, acc.w));
}

// A tile of rows a block, grid (tiles, head groups, slices): the block's query vectors are the
// tile's rows times the query heads of one KV head (at most kTileQueries), so every key and
// value row it loads serves all of them, where the one-row kernel reads it once per row. The
// slice's keys follow the tile's longest row; a row stops at its own count (causal verify
// rows). Writes like attend_row. kItems: 8 x 4-element output items a thread (D / 128,
// rounded up). Head dim a multiple of 4, every address 16-byte aligned.
template <int kItems>
__global__ void __launch_bounds__(kThreads)
    attend_row_tile(const float* __restrict__ q, const __grid_constant__ KvChunkTable table,
                    const int32_t* __restrict__ key_counts, float* __restrict__ out,
                    float* __restrict__ partial_out, float* __restrict__ partial_stats, AttentionShape s, Plan plan,
                    float scale, DeviceErrorReport* report) {
  extern __shared__ float4 tile_memory[];
  __shared__ float running_max[kTileQueries], running_total[kTileQueries], correction[kTileQueries];
  __shared__ int64_t row_keys[kTileQueries];

  const RowTileLayout layout{s.head_dim};
  float* const queries_s = reinterpret_cast<float*>(tile_memory);
  const float4* const keys4 = reinterpret_cast<const float4*>(queries_s + layout.keys_at());
  const float4* const values4 = reinterpret_cast<const float4*>(queries_s + layout.values_at());
  float* const scores_s = queries_s + layout.scores_at();

  const RowTile tile = tile_at(table, s.rows, blockIdx.x, plan.rows_per_tile);
  const KvChunk& chunk = table.chunk[tile.chunk];
  const int64_t group = blockIdx.y, slice = blockIdx.z;
  const int heads = static_cast<int>(plan.heads_per_block);
  const int64_t first_head = group * heads, kv_head = first_head / (s.q_heads / s.kv_heads);
  const int64_t kv_stride = s.kv_heads * s.head_dim;
  const int d4 = static_cast<int>(s.head_dim / 4);
  const int tile_rows = static_cast<int>(tile.end - tile.begin), queries = tile_rows * heads;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarpSize, lane = tid % kWarpSize;
  // Query vector i is row tile.begin + i / heads, head first_head + i % heads.
  auto head_row_of = [&](int i) { return (tile.begin + i / heads) * s.q_heads + first_head + i % heads; };

  if (tid < tile_rows) {
    row_keys[tid] = visible_count(key_counts, tile.begin + tid, chunk.keys, group == 0 && slice == 0, report);
  }
  if (tid < kTileQueries) {
    running_max[tid] = -INFINITY;
    running_total[tid] = 0.0f;
    correction[tid] = 1.0f;
  }
  // Scores of query vectors beyond `queries` stay 0: their values are computed and never written.
  for (int i = tid; i < kTileQueries * kScoreStride; i += kThreads) scores_s[i] = 0.0f;
  for (int i = tid; i < queries * d4; i += kThreads) {
    const int query = i / d4, c = i % d4;
    const float4 value = reinterpret_cast<const float4*>(q + head_row_of(query) * s.head_dim)[c];
    reinterpret_cast<float4*>(queries_s + query * layout.query_stride())[c] = scaled(value, scale);
  }
  __syncthreads();
  int64_t tile_count = 0;
  for (int r = 0; r < tile_rows; ++r) tile_count = max(tile_count, row_keys[r]);
  const int64_t slice_keys = slice_keys_for(tile_count, plan);
  const int64_t key_begin = slice * slice_keys, key_end = min(tile_count, key_begin + slice_keys);
  if (plan.slices > 1 && key_begin >= key_end) return;  // the merge reads only slices holding keys

  float4 acc[kItems][kQueriesPerGroup];
#pragma unroll
  for (int item = 0; item < kItems; ++item) {
#pragma unroll
    for (int i = 0; i < kQueriesPerGroup; ++i) acc[item][i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  const int score_query = tid % kTileQueries, key_lane = tid / kTileQueries;

  for (int64_t first_key = key_begin; first_key < key_end; first_key += kKeyTile) {
    const int tile_keys = static_cast<int>(min(static_cast<int64_t>(kKeyTile), key_end - first_key));
    // Keys and values of the tile, zeros past its end.
    for (int i = tid; i < kKeyTile * d4; i += kThreads) {
      const int key = i / d4, c = i % d4;
      float4 k4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v4 = k4;
      if (key < tile_keys) {
        const int64_t at = (first_key + key) * kv_stride + kv_head * s.head_dim;
        k4 = reinterpret_cast<const float4*>(chunk.k + at)[c];
        v4 = reinterpret_cast<const float4*>(chunk.v + at)[c];
      }
      reinterpret_cast<float4*>(queries_s + layout.keys_at())[i] = k4;
      reinterpret_cast<float4*>(queries_s + layout.values_at())[i] = v4;
    }
    __syncthreads();
    // Scores: a thread takes keys key_lane, key_lane + 4, ... of one query; a warp's lanes share
    // the keys (broadcast reads) and take 32 queries.
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
    for (int query = warp; query < queries; query += kWarps) {
      float* row = scores_s + query * kScoreStride;
      const float score = row[lane];
      const float old_max = running_max[query];
      const float new_max = fmaxf(old_max, warp_max(score));
      // -inf until the row has seen a key: nothing to weigh or rescale yet.
      const float weight = new_max == -INFINITY ? 0.0f : expf(score - new_max);
      row[lane] = weight;
      const float total = warp_sum(weight);
      if (lane == 0) {
        const float c = new_max == -INFINITY ? 1.0f : expf(old_max - new_max);  // 0 on the first key
        correction[query] = c;
        running_total[query] = running_total[query] * c + total;
        running_max[query] = new_max;
      }
    }
    __syncthreads();
    // Values: item w takes queries 8g .. 8g + 7 and elements 4c .. 4c + 3 of each; a warp's
    // lanes share the queries (broadcast reads of the weights) and read adjacent values.
#pragma unroll
    for (int item = 0; item < kItems; ++item) {
      const int w = tid + item * kThreads, g = w / d4, c = w % d4;
      if (g * kQueriesPerGroup >= queries) continue;
      const float* weights = scores_s + g * kQueriesPerGroup * kScoreStride;
#pragma unroll
      for (int i = 0; i < kQueriesPerGroup; ++i) {
        acc[item][i] = scaled(acc[item][i], correction[g * kQueriesPerGroup + i]);
      }
      for (int key = 0; key < tile_keys; ++key) {
        const float4 v = values4[key * d4 + c];
#pragma unroll
        for (int i = 0; i < kQueriesPerGroup; ++i) {
          acc[item][i] = plus_times(acc[item][i], weights[i * kScoreStride + key], v);
        }
      }
    }
    __syncthreads();  // the next tile overwrites keys, values and scores
  }

#pragma unroll
  for (int item = 0; item < kItems; ++item) {
    const int w = tid + item * kThreads, g = w / d4, c = w % d4;
    if (g * kQueriesPerGroup >= queries) continue;
#pragma unroll
    for (int i = 0; i < kQueriesPerGroup; ++i) {
      const int query = g * kQueriesPerGroup + i;
      if (query >= queries) break;
      const int64_t head_row = head_row_of(query);
      if (plan.slices == 1) {
        const bool sees_keys = row_keys[query / heads] > 0;
        reinterpret_cast<float4*>(out + head_row * s.head_dim)[c] =
            sees_keys ? scaled(acc[item][i], 1.0f / running_total[query]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      } else {
        reinterpret_cast<float4*>(partial_out + (head_row * plan.slices + slice) * s.head_dim)[c] = acc[item][i];
      }
    }
  }
  if (plan.slices > 1 && tid < queries) {
    const int64_t at = (head_row_of(tid) * plan.slices + slice) * 2;
    partial_stats[at] = running_max[tid];
    partial_stats[at + 1] = running_total[tid];
  }
}

// grid (rows, q_heads): weighs each slice holding keys of the row's tile by exp(its max - the
// overall max). A slice may hold none of a causal row's keys: its max is -inf, its weight 0.
__global__ void merge_slices(const __grid_constant__ KvChunkTable table, const int32_t* __restrict__ key_counts,
                             const float* __restrict__ partial_out, const float* __restrict__ partial_stats,
                             float* __restrict__ out, AttentionShape s, Plan plan) {
  const int64_t m = blockIdx.x, head_row = m * s.q_heads + blockIdx.y;
  const RowTile tile = tile_of_row(table, s.rows, m, plan.rows_per_tile);
  const int64_t keys = table.chunk[tile.chunk].keys;
  // The attention kernel reports a larger count.
  int64_t tile_count = 0;
  for (int64_t r = tile.begin; r < tile.end; ++r) {
    tile_count = max(tile_count, visible_count(key_counts, r, keys, false, nullptr));
  }
  const bool sees_keys = visible_count(key_counts, m, keys, false, nullptr) > 0;
  const int64_t slice_keys = slice_keys_for(tile_count, plan);
  const int64_t used = (tile_count + slice_keys - 1) / slice_keys;
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
    out[head_row * s.head_dim + d] = sees_keys ? numerator / denominator : 0.0f;
  }
}

size_t scratch_bytes_for(const AttentionShape& s, const Plan& plan) {
  if (plan.slices == 1) return 0;
  const auto head_rows = static_cast<size_t>(s.rows * s.q_heads * plan.slices);
  return head_rows * static_cast<size_t>(s.head_dim + 2) * sizeof(float);
}

// attend_row_tile takes more than the default 48 KB of shared memory (75 KB at head dim 128,
// 137 KB at 256); the opt-in is per device, made on the first launch (before any capture).
void allow_row_tile_shared_memory() {
  constexpr int kMostDevices = 64;
  static std::array<std::once_flag, kMostDevices> done;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice (attention)");
  if (device < 0 || device >= kMostDevices) throw Error(ErrorCode::kUnsupported, "attention: device index above 63");
  std::call_once(done[static_cast<size_t>(device)], [] {
    const int bytes = static_cast<int>(RowTileLayout{kMaxAttentionHeadDim}.bytes());
    check_cuda(cudaFuncSetAttribute(attend_row_tile<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
               "cudaFuncSetAttribute (attention)");
    check_cuda(cudaFuncSetAttribute(attend_row_tile<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
               "cudaFuncSetAttribute (attention)");
  });
}

}  // namespace

size_t attention_scratch_bytes(const AttentionShape& shape, std::span<const KvChunk> chunks) {
  if (shape.rows == 0 || shape.q_heads == 0 || shape.head_dim == 0 || chunks.empty()) return 0;
  // attention() falls back to one row a block when the addresses do not suit tiles: room for both.
  size_t bytes = scratch_bytes_for(shape, plan_for(shape, chunks, false));
  if (row_tiles_suit(shape, chunks)) bytes = std::max(bytes, scratch_bytes_for(shape, plan_for(shape, chunks, true)));
  return bytes;
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
  const bool row_tiles = row_tiles_suit(shape, chunks) && addresses_suit(q, chunks, out) &&
                         aligned_for_float4(scratch);
  const Plan plan = plan_for(shape, chunks, row_tiles);
  if (plan.tiles == 0) return;
  auto* partial_out = static_cast<float*>(scratch);
  float* partial_stats =
      plan.slices == 1 ? nullptr : partial_out + shape.rows * shape.q_heads * plan.slices * shape.head_dim;
  const dim3 grid(static_cast<unsigned>(plan.tiles), static_cast<unsigned>(plan.head_groups),
                  static_cast<unsigned>(plan.slices));
  if (row_tiles) {
    allow_row_tile_shared_memory();
    const size_t bytes = RowTileLayout{shape.head_dim}.bytes();
    if (shape.head_dim <= 128) {
      attend_row_tile<1><<<grid, kThreads, bytes, stream>>>(q, table, key_counts, out, partial_out, partial_stats,
                                                            shape, plan, scale, report);
    } else {
      attend_row_tile<2><<<grid, kThreads, bytes, stream>>>(q, table, key_counts, out, partial_out, partial_stats,
                                                            shape, plan, scale, report);
    }
  } else {
    attend_row<<<grid, kThreads, 0, stream>>>(q, table, key_counts, out, partial_out, partial_stats, shape, plan,
                                              scale, report);
  }
  check_launch("attention");
  if (plan.slices == 1) return;
  merge_slices<<<dim3(static_cast<unsigned>(shape.rows), static_cast<unsigned>(shape.q_heads)), 128, 0, stream>>>(
      table, key_counts, partial_out, partial_stats, out, shape, plan);
  check_launch("attention (merge slices)");
}

}  // namespace flashq::cuda
