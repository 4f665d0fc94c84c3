#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention_split.cuh"
#include "kernels/cuda/attention_windowed.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/kernel_launch.h"
#include "kernels/cuda/kv_element.cuh"
#include "shared/error.h"

namespace flashq::cuda {
namespace {

constexpr int kThreads = 128;  // also the keys taken in one step: a thread scores one
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kDimsPerThread = static_cast<int>(kMaxAttentionHeadDim) / kThreads;

// The block's largest or summed value; every thread gets it. `partials` kWarps floats of
// shared memory, free on entry and on return.
__device__ float block_reduce(float v, bool largest, float* partials) {
  v = largest ? warp_max(v) : warp_sum(v);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) partials[warp] = v;
  __syncthreads();
  float result = partials[0];
  for (int w = 1; w < kWarps; ++w) result = largest ? fmaxf(result, partials[w]) : result + partials[w];
  __syncthreads();
  return result;
}

// The row of k and v holding position p of `chunk`: through its block table when it is paged (-1,
// reported, for a block id outside the store), else p % keys (a ring; without a window p < keys).
__device__ int64_t row_of_position(const KvChunk& chunk, int64_t p, DeviceErrorReport* report) {
  if (chunk.block_table == nullptr) return p % chunk.keys;
  const int64_t id = chunk.block_table[p / chunk.block_size], store_blocks = chunk.keys / chunk.block_size;
  if (id < 0 || id >= store_blocks) {
    report_device_error(report, kBlockIdOutsideStore, static_cast<int32_t>(id), store_blocks);
    return -1;
  }
  return id * chunk.block_size + p % chunk.block_size;
}

// Grid (rows, q_heads): one query vector a block. Thread t owns output elements t and t + 128.
// Kv: the caches' element type (kv_element.cuh).
template <typename Kv>
__global__ void __launch_bounds__(kThreads)
    attend_with_sinks_and_window(const float* __restrict__ q, const __grid_constant__ KvChunkTable table,
                                 const int32_t* __restrict__ key_counts, float* __restrict__ out, AttentionShape s,
                                 AttentionSinksAndWindow options, float scale, DeviceErrorReport* report) {
  __shared__ float query[kMaxAttentionHeadDim];
  __shared__ float weights[kThreads];
  __shared__ int64_t key_rows[kThreads];  // the row of each key of a step; -1: none
  __shared__ float partials[kWarps];
  begin_after_previous_grid();

  const int64_t m = blockIdx.x, head = blockIdx.y;
  const int64_t kv_head = head / (s.q_heads / s.kv_heads), kv_stride = s.kv_heads * s.head_dim;
  const KvChunk& chunk = table.chunk[chunk_index_of(table, m)];
  const bool reporter = head == 0 && threadIdx.x == 0;
  int64_t count = key_counts[m];
  if (chunk.block_table != nullptr) {
    // Paged (never with a window): the table must list every block the count reaches.
    const int64_t listed = chunk.table_blocks * chunk.block_size;
    if (count > listed) {
      if (reporter) report_device_error(report, kKeyCountBeyondBlockTable, key_counts[m], listed);
      count = listed;
    }
  } else if (options.sliding_window == 0 && count > chunk.keys) {
    if (reporter) report_device_error(report, kKeyCountBeyondKeys, key_counts[m], chunk.keys);
    count = chunk.keys;
  }
  int64_t begin = options.sliding_window > 0 ? max(count - options.sliding_window, int64_t{0}) : 0;
  if (options.key_starts != nullptr) begin = max(begin, static_cast<int64_t>(options.key_starts[m]));

  const float* query_in = q + (m * s.q_heads + head) * s.head_dim;
  for (int64_t d = threadIdx.x; d < s.head_dim; d += kThreads) query[d] = query_in[d];
  // The sink is a score without a value: the softmax starts from it.
  float running_max = -INFINITY, total = 0.0f;
  if (options.sinks != nullptr) {
    running_max = weight_at(options.sinks, options.sinks_dtype, head);
    total = 1.0f;
  }
  float acc[kDimsPerThread];
  for (float& a : acc) a = 0.0f;
  __syncthreads();

  for (int64_t start = begin; start < count; start += kThreads) {
    const int64_t n = min(static_cast<int64_t>(kThreads), count - start);
    const int64_t row = threadIdx.x < n ? row_of_position(chunk, start + threadIdx.x, report) : -1;
    key_rows[threadIdx.x] = row;
    float score = -INFINITY;
    if (row >= 0) {
      const Kv* key = static_cast<const Kv*>(chunk.k) + row * kv_stride + kv_head * s.head_dim;
      float dot = 0.0f;
      for (int64_t d = 0; d < s.head_dim; ++d) dot = fmaf(query[d], read_kv(key, d), dot);
      score = dot * scale;
    }
    const float new_max = fmaxf(running_max, block_reduce(score, true, partials));  // also orders key_rows[]
    const float weight = row >= 0 ? expf(score - new_max) : 0.0f;
    weights[threadIdx.x] = weight;
    const float step_total = block_reduce(weight, false, partials);  // also orders weights[] before the reads
    const float correction = running_max == -INFINITY ? 0.0f : expf(running_max - new_max);
    total = total * correction + step_total;
    running_max = new_max;
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int64_t d = threadIdx.x + static_cast<int64_t>(i) * kThreads;
      if (d >= s.head_dim) break;
      float sum = acc[i] * correction;
      for (int64_t j = 0; j < n; ++j) {
        if (key_rows[j] < 0) continue;  // a block id outside the store, reported
        sum = fmaf(weights[j],
                   read_kv(static_cast<const Kv*>(chunk.v), key_rows[j] * kv_stride + kv_head * s.head_dim + d), sum);
      }
      acc[i] = sum;
    }
    __syncthreads();  // weights[] and key_rows[] are rewritten by the next step
  }

  float* out_row = out + (m * s.q_heads + head) * s.head_dim;
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(i) * kThreads;
    // total is 0 only when every key was an unreadable block (reported): zeros, not NaN.
    if (d < s.head_dim) out_row[d] = count > begin && total > 0.0f ? acc[i] / total : 0.0f;
  }
}

}  // namespace

void attention_with_sinks_and_window(const float* q, std::span<const KvChunk> chunks, DType kv_dtype,
                                     const int32_t* key_counts, float* out, AttentionShape shape,
                                     const AttentionSinksAndWindow& options, DeviceErrorReport* report,
                                     cudaStream_t stream) {
  if (shape.rows == 0 || shape.q_heads == 0 || shape.head_dim == 0 || chunks.empty()) return;
  if (chunks.size() > static_cast<size_t>(kMaxKvChunks)) {
    throw Error(ErrorCode::kInternal, "attention: more chunks than one launch takes");
  }
  if (shape.head_dim > kMaxAttentionHeadDim) throw Error(ErrorCode::kUnsupported, "attention: head_dim above 256");
  const bool bf16 = bf16_cache(kv_dtype, "attention (sinks, window)");
  KvChunkTable table{};
  std::copy(chunks.begin(), chunks.end(), table.chunk);
  table.count = static_cast<int>(chunks.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  launch_kernel("attention (sinks, window)",
                bf16 ? attend_with_sinks_and_window<__nv_bfloat16> : attend_with_sinks_and_window<float>,
                dim3(static_cast<unsigned>(shape.rows), static_cast<unsigned>(shape.q_heads)), kThreads, 0, stream, q,
                table, key_counts, out, shape, options, scale, report);
}

}  // namespace flashq::cuda
