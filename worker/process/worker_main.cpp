// flashq-worker: runs the engine on one device and serves jobs from a broker (docs/architecture.md).
// Two threads: this one becomes the I/O thread (WorkerBrokerLink, the only one touching sockets); the
// engine thread (JobRunner) owns the model. SIGTERM or SIGINT drain, and the exit status is 0.
#include <zmq.hpp>

#include "shared/cli.h"
#include "shared/shutdown_signal.h"
#include "worker/model/kv_cache_dtype.h"
#include "worker/process/worker_options.h"
#include "worker/process/worker_service.h"

int main(int argc, char** argv) {
  flashq::WorkerOptions options;
  CLI::App app{"flashq-worker: runs generation jobs from a flashq broker"};
  app.add_option("--broker", options.broker, "the broker's backend endpoint")->capture_default_str();
  app.add_option("--model", options.model_dir, "model directory")->required();
  app.add_option("--drafter", options.drafter_dir, "DFlash drafter directory (speculative decoding)");
  app.add_option("--model-name", options.model_name, "model name to advertise (default: the model directory's name)");
  app.add_option("--id", options.worker_id, "worker id (default: hostname-pid)");
  app.add_option("--slots", options.slots, "jobs decoding at once")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--device", options.device, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--gpu-memory-fraction", options.gpu_memory_fraction,
                 "share of the GPU for the model and its KV cache pool (the pool gets what the model leaves)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--cpu-memory-fraction", options.cpu_memory_fraction,
                 "share of the host's available memory, less the weights, for the KV cache pool on the CPU"
                 " (at most 8 GiB)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--cache-memory-mb", options.cache_memory_mb,
                 "KV cache pool size, instead of a fraction of the memory (0: no pool, whole-length caches"
                 " and no prefix caching)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-block-size", options.kv_block_size,
                 "positions per block of the paged KV cache, where there is a cache pool (0: whole-length caches)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  std::string kv_cache_dtype = "bf16";
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "bf16|float32: the KV caches' element type (bf16: half the memory per position, keys and values"
                 " rounded once as stored)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "float32"}));
  std::string prefix_caching = "on";
  app.add_option("--prefix-caching", prefix_caching,
                 "on|off: reuse the cached keys and values of a prompt's longest known prefix (paged cache only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--graphs", options.graphs,
               "record the target's and the drafter's passes and replay them while they repeat"
               " (CUDA graphs on a GPU)");
  app.add_flag("--pdl", options.pdl,
               "let each CUDA kernel start while the one before it finishes (programmatic dependent launch)");
  app.add_option("--heartbeat-ms", options.heartbeat_ms, "heartbeat interval")
      ->capture_default_str()
      ->check(CLI::Range(10, 60000));
  app.add_option("--liveness", options.liveness, "missed heartbeats before the broker counts as dead")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--reconnect-min-ms", options.reconnect_min_ms, "first reconnect backoff, doubling")
      ->capture_default_str()
      ->check(CLI::Range(1, 600000));
  app.add_option("--reconnect-max-ms", options.reconnect_max_ms, "reconnect backoff cap")
      ->capture_default_str()
      ->check(CLI::Range(1, 600000));
  app.add_option("--drain-timeout-ms", options.drain_timeout_ms, "on SIGTERM: how long running jobs may take")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--metrics-http", options.metrics_http,
                 "HOST:PORT to serve this worker's /metrics, /healthz and /readyz on (default: none)");
  app.add_option("--curve-server-key", options.curve_server_key, "KEY|FILE: the broker's CURVE public key");
  app.add_option("--curve-secret-key", options.curve_secret_key,
                 "KEY|FILE: this worker's CURVE secret key (its public key must be on the broker's allow-list)");
  return flashq::run_cli(app, argc, argv, [&] {
    options.prefix_caching = prefix_caching == "on";
    options.kv_cache_dtype = flashq::parse_kv_cache_dtype(kv_cache_dtype);
    const int shutdown_fd = flashq::install_shutdown_signals();
    zmq::context_t context;
    flashq::serve_worker(context, options, shutdown_fd);
  });
}
