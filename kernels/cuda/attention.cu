#include "kernels/cuda/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

#include "kernels/cuda/attend_row.cuh"
#include "kernels/cuda/attend_tile.cuh"
#include "kernels/cuda/attention_split.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"

namespace flashq::cuda {
namespace {

// attend_row: a row a block, any shape; attend_tile: 8 query vectors a block (decode) or 64
// (blocks of rows), float4 shapes and addresses.
enum class AttentionKernel { kOneRow, kDecodeTile, kRowTile };

// Below this many rows in every chunk (decode), tiles of one row's heads are the better split.
constexpr int64_t kMinRowsForRowTiles = 4;

int64_t rows_of_chunk(std::span<const KvChunk> chunks, size_t c, int64_t total_rows) {
  return (c + 1 < chunks.size() ? chunks[c + 1].first_row : total_rows) - chunks[c].first_row;
}

// The float4 kernel the shape takes, or kOneRow when its head dim is not a multiple of 4.
AttentionKernel tile_kernel_for(const AttentionShape& s, std::span<const KvChunk> chunks) {
  if (s.head_dim % 4 != 0) return AttentionKernel::kOneRow;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (rows_of_chunk(chunks, c, s.rows) >= kMinRowsForRowTiles) return AttentionKernel::kRowTile;
  }
  return AttentionKernel::kDecodeTile;
}

AttentionKernel kernel_for(const AttentionShape& s, std::span<const KvChunk> chunks, const float* q,
                           const float* out, const void* scratch, AttentionKernels allowed) {
  if (allowed == AttentionKernels::kOneRow) return AttentionKernel::kOneRow;
  const bool aligned =
      aligned16(q) && aligned16(out) && aligned16(scratch) &&
      std::all_of(chunks.begin(), chunks.end(), [](const KvChunk& c) { return aligned16(c.k) && aligned16(c.v); });
  return aligned ? tile_kernel_for(s, chunks) : AttentionKernel::kOneRow;
}

// Query heads per block: the largest divisor of the group size (q_heads / kv_heads) up to 8, so
// that a block's heads share one KV head. Slices: enough blocks to give every SM of an H100
// (132) two (four for the light decode tiles), so that a single decode row is spread.
constexpr int64_t kTargetBlocks = 264, kDecodeTargetBlocks = 528;
// Keys are split only below the target: then (tile, head group) pairs, one counter each, are fewer.
static_assert(kTargetBlocks <= kAttentionSliceCounters && kDecodeTargetBlocks <= kAttentionSliceCounters);

AttentionPlan plan_for(const AttentionShape& s, std::span<const KvChunk> chunks, AttentionKernel kernel) {
  const int64_t group = s.q_heads / s.kv_heads;
  int64_t heads = 1;
  for (int64_t h = std::min<int64_t>(group, kMaxHeadsPerBlock); h >= 1; --h) {
    if (group % h == 0) {
      heads = h;
      break;
    }
  }
  int64_t rows_per_tile = 1, min_slice_keys = kRowKeyTile, target_blocks = kTargetBlocks;
  if (kernel == AttentionKernel::kRowTile) rows_per_tile = kBlockQueries / heads;
  if (kernel == AttentionKernel::kDecodeTile) {
    rows_per_tile = kDecodeQueries / heads;
    min_slice_keys = kKeyTile;
    target_blocks = kDecodeTargetBlocks;
  }
  int64_t tiles = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    tiles += (rows_of_chunk(chunks, c, s.rows) + rows_per_tile - 1) / rows_per_tile;
  }
  const int64_t head_groups = s.q_heads / heads;
  const int64_t blocks_per_slice = std::max<int64_t>(1, tiles * head_groups);
  const int64_t most_slices = std::max<int64_t>(1, (s.keys + min_slice_keys - 1) / min_slice_keys);
  const int64_t wanted = (target_blocks + blocks_per_slice - 1) / blocks_per_slice;
  const int64_t slices = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(most_slices, 65535));
  return {heads, head_groups, slices, rows_per_tile, tiles, min_slice_keys};
}

// The one-row kernel's second launch, grid (rows, q_heads); the tile kernels merge in the last
// block of each tile to finish (attend_tile.cuh).
__global__ void merge_slices(const __grid_constant__ KvChunkTable table, const int32_t* __restrict__ key_counts,
                             const float* __restrict__ partial_out, const float* __restrict__ partial_stats,
                             float* __restrict__ out, AttentionShape s, AttentionPlan plan) {
  begin_after_previous_grid();
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
  merge_query_slices(partial_out, partial_stats, out, head_row, used, sees_keys, plan.slices, s.head_dim,
                     static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

size_t scratch_bytes_for(const AttentionShape& s, const AttentionPlan& plan) {
  if (plan.slices == 1) return 0;
  const auto head_rows = static_cast<size_t>(s.rows * s.q_heads * plan.slices);
  return head_rows * static_cast<size_t>(s.head_dim + 2) * sizeof(float);
}

// The attend_tile variants: 8 or 64 query vectors, accumulators for a head dim up to 128 or up
// to kMaxAttentionHeadDim, and caches of Kv (float or bf16). Their parameters do not depend on
// Kv, so every variant has one pointer type.
template <typename Kv>
constexpr auto kDecodeUpTo128 = attend_tile<kDecodeQueries, accumulators_for<kDecodeQueries>(128), Kv>;
template <typename Kv>
constexpr auto kDecodeUpToMost =
    attend_tile<kDecodeQueries, accumulators_for<kDecodeQueries>(kMaxAttentionHeadDim), Kv>;
template <typename Kv>
constexpr auto kBlockUpTo128 = attend_tile<kBlockQueries, accumulators_for<kBlockQueries>(128), Kv>;
template <typename Kv>
constexpr auto kBlockUpToMost = attend_tile<kBlockQueries, accumulators_for<kBlockQueries>(kMaxAttentionHeadDim), Kv>;
using TileKernel = std::remove_const_t<decltype(kDecodeUpTo128<float>)>;

template <typename Kv>
TileKernel tile_kernel_of(bool decode, bool up_to_128) {
  return decode ? (up_to_128 ? kDecodeUpTo128<Kv> : kDecodeUpToMost<Kv>)
                : (up_to_128 ? kBlockUpTo128<Kv> : kBlockUpToMost<Kv>);
}

// The 64-query tiles take more than the default 48 KB of shared memory (75 KB at head dim 128,
// 137 KB at 256); the opt-in is per device, made on the first launch (before any capture).
void allow_tile_shared_memory() {
  constexpr int kMostDevices = 64;
  static std::array<std::once_flag, kMostDevices> done;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice (attention)");
  if (device < 0 || device >= kMostDevices) throw Error(ErrorCode::kUnsupported, "attention: device index above 63");
  std::call_once(done[static_cast<size_t>(device)], [] {
    for (const TileKernel kernel :
         {kDecodeUpTo128<float>, kDecodeUpToMost<float>, kBlockUpTo128<float>, kBlockUpToMost<float>,
          kDecodeUpTo128<__nv_bfloat16>, kDecodeUpToMost<__nv_bfloat16>, kBlockUpTo128<__nv_bfloat16>,
          kBlockUpToMost<__nv_bfloat16>}) {
      const int bytes = static_cast<int>(TileLayout{kMaxAttentionHeadDim, kBlockQueries}.bytes());
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                 "cudaFuncSetAttribute (attention)");
    }
  });
}

}  // namespace

AttentionKernels attention_kernels_from_environment() {
  const char* value = std::getenv("FLASHQ_CUDA_ATTENTION");
  if (value == nullptr || std::string_view(value) == "tiles") return AttentionKernels::kTiles;
  if (std::string_view(value) == "one-row") return AttentionKernels::kOneRow;
  throw Error(ErrorCode::kInvalidArgument,
              std::string("FLASHQ_CUDA_ATTENTION=") + value + ": expected tiles (the default) or one-row");
}

size_t attention_scratch_bytes(const AttentionShape& shape, std::span<const KvChunk> chunks) {
  if (shape.rows == 0 || shape.q_heads == 0 || shape.head_dim == 0 || chunks.empty()) return 0;
  // attention() falls back to a row a block when the addresses do not suit tiles: room for both.
  const size_t one_row = scratch_bytes_for(shape, plan_for(shape, chunks, AttentionKernel::kOneRow));
  return std::max(one_row, scratch_bytes_for(shape, plan_for(shape, chunks, tile_kernel_for(shape, chunks))));
}

void attention(const float* q, std::span<const KvChunk> chunks, DType kv_dtype, const int32_t* key_counts, float* out,
               AttentionShape shape, AttentionKernels kernels, void* scratch, int32_t* slice_counters,
               DeviceErrorReport* report, cudaStream_t stream) {
  if (shape.rows == 0 || shape.q_heads == 0 || shape.head_dim == 0 || chunks.empty()) return;
  if (chunks.size() > static_cast<size_t>(kMaxKvChunks)) {
    throw Error(ErrorCode::kInternal, "attention: more chunks than one launch takes");
  }
  if (std::any_of(chunks.begin(), chunks.end(), [](const KvChunk& c) { return c.block_table != nullptr; })) {
    throw Error(ErrorCode::kInternal,
                "attention: these kernels read no block table (paged chunks take "
                "attention_with_sinks_and_window)");
  }
  const bool bf16 = bf16_cache(kv_dtype, "attention");
  KvChunkTable table{};
  std::copy(chunks.begin(), chunks.end(), table.chunk);
  table.count = static_cast<int>(chunks.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const AttentionKernel kernel = kernel_for(shape, chunks, q, out, scratch, kernels);
  const AttentionPlan plan = plan_for(shape, chunks, kernel);
  if (plan.tiles == 0) return;
  auto* partial_out = static_cast<float*>(scratch);
  float* partial_stats =
      plan.slices == 1 ? nullptr : partial_out + shape.rows * shape.q_heads * plan.slices * shape.head_dim;
  const dim3 grid(static_cast<unsigned>(plan.tiles), static_cast<unsigned>(plan.head_groups),
                  static_cast<unsigned>(plan.slices));
  if (kernel == AttentionKernel::kOneRow) {
    launch_kernel("attention", bf16 ? attend_row<__nv_bfloat16> : attend_row<float>, grid, kRowThreads, 0, stream, q,
                  table, key_counts, out, partial_out, partial_stats, shape, plan, scale, report);
  } else {
    allow_tile_shared_memory();
    const bool decode = kernel == AttentionKernel::kDecodeTile, up_to_128 = shape.head_dim <= 128;
    const TileKernel launch =
        bf16 ? tile_kernel_of<__nv_bfloat16>(decode, up_to_128) : tile_kernel_of<float>(decode, up_to_128);
    const size_t bytes = TileLayout{shape.head_dim, decode ? kDecodeQueries : kBlockQueries}.bytes();
    if (plan.slices > 1 && plan.tiles * plan.head_groups > kAttentionSliceCounters) {
      throw Error(ErrorCode::kInternal, "attention: more split tiles than slice counters");
    }
    launch_kernel("attention", launch, grid, kTileThreads, bytes, stream, q, table, key_counts, out, partial_out,
                  partial_stats, slice_counters, shape, plan, scale, report);
    return;
  }
  if (plan.slices == 1) return;
  launch_kernel("attention (merge slices)", merge_slices,
                dim3(static_cast<unsigned>(shape.rows), static_cast<unsigned>(shape.q_heads)), 128, 0, stream, table,
                key_counts, partial_out, partial_stats, out, shape, plan);
}

}  // namespace flashq::cuda
