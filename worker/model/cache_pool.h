// One preallocated block of device memory that every sequence's KV cache and draft context cache
// is carved from, sized once at start (`--gpu-memory-fraction` on a GPU, `--cpu-memory-fraction`
// on the CPU, or `--cache-memory-mb`). A sequence takes its caches whole when the engine admits
// it, so nothing is allocated in the decode loop, and a sequence whose caches do not fit now
// waits for memory instead of failing an allocation halfway through a step.
//
// In host memory the pool is mapped, not touched: the kernel commits each page the first time a
// cache writes it, so a pool sized from the machine's memory costs what its caches have used so
// far, not its size, and many workers on one host (or a test suite's) start without committing
// their pools.
//
// First fit over a free list in address order, merged with its neighbours on release; a run
// goes back to the pool when the last tensor viewing it is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "kernels/backend.h"

namespace flashq {

class CachePool {
 public:
  // Runs are aligned to this many bytes (a cache line, and more than any kernel's vector width).
  static constexpr int64_t kAlignment = 256;

  // One allocation of `bytes` on the backend's device (host memory mapped as above);
  // kInvalidArgument unless positive, kIo when host memory cannot be mapped.
  CachePool(Backend& backend, int64_t bytes);
  ~CachePool();
  CachePool(const CachePool&) = delete;
  CachePool& operator=(const CachePool&) = delete;

  int64_t capacity_bytes() const;
  int64_t free_bytes() const;
  // The longest free run: what one allocation can take now.
  int64_t largest_free_bytes() const;

  // A tensor of `shape` in a run of its own, or nothing when no free run is long enough. Its
  // contents are whatever the run held before.
  std::optional<Tensor> try_allocate(DType dtype, Shape shape);

  // What an allocation of `bytes` takes from the pool (rounded up to the alignment).
  static int64_t footprint(int64_t bytes);

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with every run's tensor, which may outlive the pool
};

// The bytes for caches on a device of `total_bytes` of which `free_bytes` are free now (after the
// weights and the workspace were allocated): `fraction` of the total less what is in use, as
// vLLM's gpu_memory_utilization. kInvalidArgument naming the figures when nothing is left, or
// when `fraction` is outside (0, 1].
int64_t cache_pool_bytes(double fraction, int64_t total_bytes, int64_t free_bytes);

// The default pool in host memory (the CPU without --cache-memory-mb): `fraction` of what the
// host has available once the model is loaded, less the checkpoint's weights (mapped from their
// files, so the kernel counts them as page cache it could reclaim, though every step reads
// them), and at most the smaller of `useful_bytes` (what the worker could fill: every slot at the
// model's whole context, and as much again of cached prefixes) and kHostCachePoolMaxBytes.
// 0 (no pool) when that leaves less than kHostCachePoolMinBytes (or `useful_bytes`, if smaller).
// kInvalidArgument when `fraction` is outside (0, 1].
inline constexpr int64_t kHostCachePoolMaxBytes = int64_t{8} << 30;
inline constexpr int64_t kHostCachePoolMinBytes = int64_t{64} << 20;
int64_t host_cache_pool_bytes(double fraction, int64_t available_bytes, int64_t weight_bytes, int64_t useful_bytes);

}  // namespace flashq
