// One preallocated block of device memory that every sequence's KV cache and draft context cache
// is carved from, sized once at start (`--gpu-memory-fraction`, or `--cache-memory-mb`). A
// sequence takes its caches whole when the engine admits it, so nothing is allocated in the
// decode loop, and a sequence whose caches do not fit now waits for memory instead of failing
// an allocation halfway through a step.
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

  // One allocation of `bytes` on the backend's device; kInvalidArgument unless positive.
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

}  // namespace flashq
