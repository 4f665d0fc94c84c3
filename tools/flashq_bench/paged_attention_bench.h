// The paged-attention lines of `flashq-bench kernels`: decode rows of 1 and 16 sequences at
// Qwen3-0.6B's attention shape (16 query heads over 8 KV heads of 128) over 2,000 and 8,000
// keys each, through Backend::store_and_attend (the call a decode step makes, a row stored and
// attended per sequence), with each sequence's keys in a cache of its own (contiguous) and in
// blocks of 16 of one shared store, read through a shuffled block table (paged): the same
// buffer, so both read the same memory. Both are timed in the same run, alternating, and
// reported side by side with their ratio. Then, per key count, a later turn's prefill: 256 new
// rows against the cache (contiguous), in GFLOP/s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tools/flashq_bench/moe_bench.h"

namespace flashq {

// On `backend`; lines named `kernel` ("paged_attention", "cuda_paged_attention"). `rounds`:
// contiguous and paged timed in turn this many times; the medians are reported. The caches hold
// `cache_dtype` (float32 or bf16).
void report_paged_attention(Backend& backend, const std::string& kernel, const TimePerCall& time,
                            const std::vector<int64_t>& keys_list, int rounds, DType cache_dtype);

}  // namespace flashq
