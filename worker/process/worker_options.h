// The flags of flashq-worker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/dtype.h"

namespace flashq {

struct WorkerOptions {
  std::string broker = "tcp://127.0.0.1:5556";  // the broker's backend ROUTER
  std::string model_dir;
  std::string drafter_dir;  // empty: no speculation
  std::string model_name;   // what READY advertises and jobs' `model` must match; default: the model dir's name
  std::string worker_id;    // default: hostname-pid
  std::string device = "auto";
  int64_t slots = 8;  // sequences decoding at once
  // The KV cache pool (worker/model/cache_pool.h): `cache_memory_mb` MiB when set, and none when
  // that is 0; else, on a GPU, gpu_memory_fraction of the device less what the model uses once
  // loaded; else (the CPU) cpu_memory_fraction of the host's available memory less the weights,
  // at most 8 GiB (host_cache_pool_bytes).
  double gpu_memory_fraction = 0.9;
  double cpu_memory_fraction = 0.5;
  std::optional<int64_t> cache_memory_mb;
  // Where there is a pool: the target's KV cache paged in blocks of this many positions, with
  // prefix caching unless prefix_caching is off (docs/operations.md, "Sizing the block pool");
  // 0: whole-length caches, as without a pool.
  int64_t kv_block_size = 16;
  bool prefix_caching = true;
  // The element type of every KV cache, the drafter's included (worker/model/kv_cache_dtype.h).
  DType kv_cache_dtype = DType::kBF16;
  // Record the target's and the drafter's passes and replay them while they repeat (CUDA graphs
  // on a GPU).
  bool graphs = false;
  // Let each CUDA kernel start while the one before it finishes (programmatic dependent launch).
  bool pdl = false;
  int64_t heartbeat_ms = 1000;
  int64_t liveness = 3;             // missed heartbeats before the broker counts as dead
  int64_t reconnect_min_ms = 100;   // first backoff after losing the broker, doubling ...
  int64_t reconnect_max_ms = 5000;  // ... up to this
  int64_t drain_timeout_ms = 30000;
  // CurveZMQ (docs/security.md): the broker's public key and our secret key, KEY|FILE each; both
  // empty: plain TCP.
  std::string curve_server_key;
  std::string curve_secret_key;
  // host:port for /metrics, /healthz and /readyz (docs/operations.md §5); empty: none.
  std::string metrics_http;
};

}  // namespace flashq
