// Attention with gpt-oss's options on the GPU (kernels/backend.h, AttentionOptions): a sink
// logit per query head in each row's softmax denominator, and a sliding window over keys held
// in a ring (position p at row p % keys of its chunk); and paged keys, read through each chunk's
// block table (KvChunk, attention.h). Twin: kernels/cpu/attention.cpp with AttentionExtras.
// Written to be obviously correct rather than fast: a block per (row, query head) walks the
// row's keys 128 at a time, one thread finding and scoring each key, with an online softmax that
// starts from the sink. attention() (attention.h) keeps the default options' fast paths.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_error.h"
#include "kernels/dtype.h"

namespace flashq::cuda {

struct AttentionSinksAndWindow {
  const void* sinks = nullptr;  // [q_heads] of sinks_dtype (f32 or bf16); null: none
  DType sinks_dtype = DType::kF32;
  int64_t sliding_window = 0;           // 0: keys [0, count), a count beyond the chunk's keys reported
  const int32_t* key_starts = nullptr;  // [rows]: row m's first position, when later (null: 0)
};

// `chunks` (at most kMaxKvChunks) cover q's rows in order, their k and v all of `kv_dtype` (f32
// or bf16, widened to float32 as read), each with its keys (with a window, at least the window:
// the ring). Row m with key count c attends positions [max(0, c - window), c) (window 0:
// [0, c)); a row that sees no key gets zeros. A paged chunk
// (never with a window) reports a count beyond its table's blocks and attends what the table
// holds, and reports a block id outside its store and skips that block's keys (device_error.h).
// Allocates nothing.
void attention_with_sinks_and_window(const float* q, std::span<const KvChunk> chunks, DType kv_dtype,
                                     const int32_t* key_counts, float* out, AttentionShape shape,
                                     const AttentionSinksAndWindow& options, DeviceErrorReport* report,
                                     cudaStream_t stream);

}  // namespace flashq::cuda
