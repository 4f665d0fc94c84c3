// Grouped-query attention on the GPU (twin: kernels/cpu/attention.cpp). q[rows, q_heads, D];
// k, v[keys, kv_heads, D]; query row m attends keys [0, key_counts[m]) with scale 1/sqrt(D).
// The rows may belong to several sequences (chunks), each with its own k and v, in one launch.
//
// Split over the keys (flash-decoding): a block takes the query heads of one KV head (so each
// key row is read once for all of them), one slice of the keys and a tile of rows of one chunk:
// up to 64 / heads rows when a chunk has 4 or more (verify and draft blocks, prefill), whose
// query vectors then share every key and value the block loads, else up to 8 / heads (decode:
// one row). Keys and values go through shared memory 32 at a time (attend_tile.cuh); a head
// dim that is not a multiple of 4, or an address not 16-byte aligned, takes a block per row
// instead (attend_row.cuh). Each block walks its slice with an online softmax and leaves an
// unnormalised partial result; the last block of a tile to finish merges its slices (the
// one-row kernel: a second kernel). The number of slices follows the shape (enough blocks to
// fill the GPU; with enough rows, one slice and no merge), so a row's last bits depend on the
// launch it is in (not batch invariant: docs/decisions.md), and each tile spreads its longest
// row's key count, read on the device, over them: a launch does not depend on the counts, so a
// captured one stays right as the caches fill. A key count beyond
// its chunk's keys is reported through `report` (device_error.h) and clamped; a count <= 0
// gives zeros. A bf16 cache's keys and values are widened to float32 as they are loaded;
// scores, softmax and sums are float32 whatever the cache holds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cuda/device_error.h"
#include "kernels/dtype.h"

namespace flashq::cuda {

// Largest head_dim the kernel handles (Qwen3 and Llama use 128).
inline constexpr int64_t kMaxAttentionHeadDim = 256;

// Chunks one launch takes (they travel in the kernel's parameters); more take several launches.
inline constexpr int kMaxKvChunks = 64;

// Counters attention() needs: a launch splits the keys only when it has fewer than 528 blocks
// of (tile, head group), and counts a tile's finished slices in one counter each.
inline constexpr int64_t kAttentionSliceCounters = 1024;

// One sequence's rows of q, from first_row up to the next chunk's, attend its own k and v, of
// which `keys` rows may be attended. A paged chunk (block_table not null) reads position p at row
// block_table[p / block_size] * block_size + p % block_size of k and v, a store of `keys` rows
// shared with other chunks; its table has `table_blocks` entries. Only
// attention_with_sinks_and_window (attention_windowed.h) reads a table; attention() refuses one.
// k and v hold the launch's cache dtype, f32 or bf16 (kv_element.cuh), the same for every chunk.
struct KvChunk {
  const void* k;
  const void* v;
  int64_t first_row, keys;
  const int32_t* block_table = nullptr;  // on the device; null: position p at row p
  int64_t block_size = 0, table_blocks = 0;
};

// rows: of q (all chunks); keys: the most any chunk has.
struct AttentionShape {
  int64_t rows, q_heads, kv_heads, head_dim, keys;
};

// The kernels attention() may choose: the tiles wherever the shape and the addresses allow
// (the default), or the one-row kernel always, an escape should a tile kernel misbehave on some
// device, which needs no rebuild (FLASHQ_CUDA_ATTENTION=one-row).
enum class AttentionKernels { kTiles, kOneRow };

// FLASHQ_CUDA_ATTENTION: unset or "tiles", or "one-row"; any other value throws kInvalidArgument.
AttentionKernels attention_kernels_from_environment();

// Bytes of scratch attention() needs for this shape and these chunks (0 when it needs none),
// whichever kernels it may choose.
size_t attention_scratch_bytes(const AttentionShape& shape, std::span<const KvChunk> chunks);

// `chunks` (at most kMaxKvChunks) cover q's rows in order, their k and v all of `kv_dtype` (f32
// or bf16); `scratch` holds at least attention_scratch_bytes(shape, chunks) bytes;
// `slice_counters`, kAttentionSliceCounters zeros (every call leaves them zero), belong to this
// stream's calls alone. Allocates nothing.
void attention(const float* q, std::span<const KvChunk> chunks, DType kv_dtype, const int32_t* key_counts, float* out,
               AttentionShape shape, AttentionKernels kernels, void* scratch, int32_t* slice_counters,
               DeviceErrorReport* report, cudaStream_t stream);

}  // namespace flashq::cuda
