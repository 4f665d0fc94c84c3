// A worker's own metrics, served on --metrics-http as Prometheus text (docs/operations.md §5):
// engine step time, batch size and tokens per step, the time spent in each kind of pass (prefill,
// drafting, verifying, the rest), jobs running, the KV cache pool's use, and the paged cache's
// blocks, prefix cache hits and preemptions.
// The engine thread records; the HTTP thread renders; a mutex between.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "shared/prometheus_text.h"
#include "worker/engine/engine.h"

namespace flashq {

class WorkerMetrics {
 public:
  WorkerMetrics();

  // One engine step that decoded `batch` sequences in `seconds`, committing `tokens` tokens of
  // output; `jobs_running` after it.
  void engine_step(double seconds, int64_t batch, int64_t tokens, int64_t jobs_running);
  // Seconds one step spent in each kind of pass (Engine::phase_seconds, as a difference).
  void pass_seconds(double prefill, double draft, double verify, double other);
  // The KV cache pool after a step (absent without one: --cache-memory-mb 0, or too little memory).
  void cache_pool(int64_t capacity_bytes, int64_t used_bytes);
  // The paged KV cache after a step: its blocks, prefix lookups and hits, evictions, preemptions.
  void paged_cache(const PagedCacheStats& stats);

  std::string render() const;

 private:
  mutable std::mutex mutex_;
  uint64_t steps_ = 0, tokens_ = 0;
  int64_t jobs_running_ = 0;
  bool has_pool_ = false;
  int64_t pool_capacity_ = 0, pool_used_ = 0;
  std::optional<PagedCacheStats> paged_;
  double prefill_seconds_ = 0, draft_seconds_ = 0, verify_seconds_ = 0, other_seconds_ = 0;
  Histogram step_time_, batch_size_, step_tokens_;
};

}  // namespace flashq
