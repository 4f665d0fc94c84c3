// `flashq-bench kv-memory`: the KV cache memory one sequence takes, from a model directory's
// config.json alone (`flashq-model make-tiny --preset NAME --config-only` writes one for a real
// shape): whole-length caches (sized to the sequence, and to the model's context), and paged
// caches grown through the engine's own calls (KvCache over a PagedKvStore: the prefill in
// passes of KvCache::kMaxRowsPerPass, then a decode step), with every layer's positions held and
// with sliding-window layers holding their window's blocks only. Measured, not timed: the blocks
// the cache holds times the bytes of a block.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_kv_memory_bench(CLI::App& app);

}  // namespace flashq
