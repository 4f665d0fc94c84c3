// One batched forward pass of a target model, whatever its family: the sequence chunks it runs
// (prefill of N tokens, decode of 1, verification of a block of B: the same call), which
// logits it returns and which layers' residual streams it taps (the DFlash taps, docs/dflash.md §2.1).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/tensor.h"
#include "worker/model/kv_cache.h"

namespace flashq {

struct SequenceChunk {
  std::span<const int32_t> tokens;  // run at positions cache->length() ...
  KvCache* cache;
};

enum class LogitRows { kNone, kLastOfEachChunk, kAll };

struct ForwardOptions {
  LogitRows logits = LogitRows::kLastOfEachChunk;
  std::vector<int64_t> tap_layers;  // 0-based; residual stream after each, in this order
};

// Views into the model's workspace: valid until the next forward call.
struct ForwardOutput {
  Tensor logits;  // [rows, vocab]: one row per chunk, or per token, as asked
  Tensor taps;    // [tokens, tap_layers.size() * hidden] when taps were asked for
};

}  // namespace flashq
