// How attention() (attention.h) divides its work among blocks, and what its kernels share:
// the chunk table, the tiles of rows a block takes, the slices of the keys. Included by
// kernels/cuda/attention.cu and the kernels it launches (attend_row.cuh, attend_tile.cuh).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_error.h"

namespace flashq::cuda {

// The grid depends only on the shape (rows per chunk, heads, the most keys a row may have),
// never on the key counts, which live on the device: a captured launch stays right as the
// caches fill. A block takes heads_per_block query heads of one KV head, a tile of up to
// rows_per_tile consecutive rows of one chunk and one of `slices` slices of the keys; each
// tile's keys are spread over the slices, at least min_slice_keys a slice.
struct AttentionPlan {
  int64_t heads_per_block, head_groups, slices, rows_per_tile, tiles, min_slice_keys;
};

// Keys per slice for a tile whose rows see at most `count` keys, so that a short row uses few
// slices and a long one all of them. The attention kernels and the merge agree on it.
__host__ __device__ inline int64_t slice_keys_for(int64_t count, const AttentionPlan& plan) {
  const int64_t spread = (count + plan.slices - 1) / plan.slices;
  return spread > plan.min_slice_keys ? spread : plan.min_slice_keys;
}

// Passed by value as a __grid_constant__ parameter: read in place, never copied per thread.
struct KvChunkTable {
  KvChunk chunk[kMaxKvChunks];
  int count;
};

// Rows [begin, end) of one chunk, taken by one block.
struct RowTile {
  int chunk;
  int64_t begin, end;
};

#ifdef __CUDACC__
// The chunk holding query row m (chunks are in row order, empty ones skipped).
__device__ inline int chunk_index_of(const KvChunkTable& table, int64_t m) {
  int c = 0;
  while (c + 1 < table.count && m >= table.chunk[c + 1].first_row) ++c;
  return c;
}

__device__ inline int64_t end_of_chunk(const KvChunkTable& table, int c, int64_t total_rows) {
  return c + 1 < table.count ? table.chunk[c + 1].first_row : total_rows;
}

// Tiles start at each chunk's first row, rows_per_tile apart; the last of a chunk may be short.
__device__ inline RowTile tile_of_row(const KvChunkTable& table, int64_t total_rows, int64_t m,
                                      int64_t rows_per_tile) {
  const int c = chunk_index_of(table, m);
  const int64_t first = table.chunk[c].first_row;
  const int64_t begin = first + (m - first) / rows_per_tile * rows_per_tile;
  return {c, begin, min(begin + rows_per_tile, end_of_chunk(table, c, total_rows))};
}

// Tile number `index`, counting every chunk's tiles in chunk order (as the plan does).
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

// One step of the online softmax of a query: its running max and total move to a tile whose
// largest score is at most new_max and whose weights exp(score - new_max) sum to tile_total;
// `correction` is what the sums so far are multiplied by. A max still -inf (no key seen yet)
// rescales nothing.
__device__ inline void advance_softmax(float& running_max, float& running_total, float& correction, float new_max,
                                       float tile_total) {
  const float c = new_max == -INFINITY ? 1.0f : expf(running_max - new_max);  // 0 on the first key
  correction = c;
  running_total = running_total * c + tile_total;
  running_max = new_max;
}

// Flash-decoding's second step for one query vector (head_row): the first `used` slices of its
// partial sums, each weighed by exp(its max - the overall max) (a slice holding none of a
// causal row's keys has max -inf and weight 0); zeros for a row that sees no key. Threads
// first, first + stride, ... write its elements. The partials come from other blocks, so they
// are read from L2.
__device__ inline void merge_query_slices(const float* partial_out, const float* partial_stats, float* out,
                                          int64_t head_row, int64_t used, bool sees_keys, int64_t slices,
                                          int64_t head_dim, int first, int stride) {
  const float* stats = partial_stats + head_row * slices * 2;
  float best = -INFINITY;
  for (int64_t i = 0; i < used; ++i) best = fmaxf(best, __ldcg(stats + 2 * i));
  float denominator = 0.0f;
  for (int64_t i = 0; i < used; ++i) denominator += expf(__ldcg(stats + 2 * i) - best) * __ldcg(stats + 2 * i + 1);
  for (int64_t d = first; d < head_dim; d += stride) {
    float numerator = 0.0f;
    for (int64_t i = 0; i < used; ++i) {
      numerator += expf(__ldcg(stats + 2 * i) - best) * __ldcg(partial_out + (head_row * slices + i) * head_dim + d);
    }
    out[head_row * head_dim + d] = sees_keys ? numerator / denominator : 0.0f;
  }
}

// Keys row m attends: its count, clamped into [0, keys]; the reporter reports a count beyond.
__device__ inline int64_t visible_count(const int32_t* key_counts, int64_t m, int64_t keys, bool reporter,
                                        DeviceErrorReport* report) {
  const int64_t count = key_counts[m];
  if (count > keys) {
    if (reporter) report_device_error(report, kKeyCountBeyondKeys, key_counts[m], keys);
    return keys;
  }
  return count > 0 ? count : 0;
}
#endif

}  // namespace flashq::cuda
