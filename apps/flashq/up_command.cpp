#include "apps/flashq/up_command.h"

#include <atomic>
#include <cstdio>
#include <thread>

#include "broker/broker.h"
#include "gateway/server/embedded_gateway.h"
#include "shared/shutdown_signal.h"
#include "worker/model/kv_cache_dtype.h"
#include "worker/process/worker_service.h"

namespace flashq {
namespace {

struct UpOptions {
  BrokerOptions broker;
  WorkerOptions worker;
  std::string gateway = "127.0.0.1:8000";  // host:port of the OpenAI-compatible gateway; empty: none
  std::vector<std::string> api_keys;
  std::string kv_cache_dtype = "bf16";
};

void run_up(UpOptions& o) {
  zmq::context_t context;
  o.broker.backend = "inproc://flashq-backend";
  o.worker.broker = o.broker.backend;
  Broker broker(context, o.broker);
  // The gateway speaks to the broker as any producer does, over its frontend and stream sockets.
  std::unique_ptr<gateway::EmbeddedGateway> front_door;
  if (!o.gateway.empty()) {
    gateway::GatewayOptions options;
    options.brokers.push_back({broker.frontend_endpoint(), broker.stream_endpoint(), std::nullopt});
    options.api_keys.insert(o.api_keys.begin(), o.api_keys.end());
    front_door = std::make_unique<gateway::EmbeddedGateway>(o.gateway, std::move(options));
  }
  const std::string gateway_url =
      front_door ? "http://" + o.gateway.substr(0, o.gateway.rfind(':')) + ":" + std::to_string(front_door->port()) + "/v1"
                 : "off";
  std::printf("flashq up: frontend %s  stream %s  http %s  gateway %s  model %s%s%s\n",
              broker.frontend_endpoint().c_str(), broker.stream_endpoint().c_str(),
              o.broker.http.empty() ? "off" : o.broker.http.c_str(), gateway_url.c_str(), o.worker.model_dir.c_str(),
              o.worker.drafter_dir.empty() ? "" : "  drafter ", o.worker.drafter_dir.c_str());
  std::fflush(stdout);

  std::atomic<bool> stop{false};
  std::thread broker_thread([&] { broker.run(stop); });
  struct StopBroker {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~StopBroker() {
      stop = true;
      thread.join();
    }
  } stop_broker{stop, broker_thread};
  const int shutdown_fd = install_shutdown_signals();
  serve_worker(context, o.worker, shutdown_fd);  // returns once SIGINT/SIGTERM drained the worker
  front_door.reset();                           // before the broker it speaks to
}

}  // namespace

std::function<void()> add_up_command(CLI::App& app) {
  auto o = std::make_shared<UpOptions>();
  CLI::App* cmd = app.add_subcommand("up", "run a broker and a worker in this process (the embedded default)");
  cmd->add_option("--model", o->worker.model_dir, "model directory")->required();
  cmd->add_option("--drafter", o->worker.drafter_dir, "DFlash drafter directory");
  cmd->add_option("--slots", o->worker.slots, "sequences decoding at once")->capture_default_str();
  cmd->add_option("--device", o->worker.device, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--gpu-memory-fraction", o->worker.gpu_memory_fraction,
                  "share of the GPU for the model and its KV cache pool")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--cpu-memory-fraction", o->worker.cpu_memory_fraction,
                  "share of the host's available memory, less the weights, for the KV cache pool on the CPU"
                  " (at most 8 GiB)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--cache-memory-mb", o->worker.cache_memory_mb,
                  "KV cache pool size, instead of a fraction of the memory (0: no pool, whole-length caches"
                  " and no prefix caching)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "bf16|float32: the KV caches' element type (bf16: half the memory per position)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "float32"}));
  cmd->add_flag("--graphs", o->worker.graphs,
               "record the target's and the drafter's passes and replay them while they repeat"
               " (CUDA graphs on a GPU)");
  cmd->add_flag("--pdl", o->worker.pdl,
                "let each CUDA kernel start while the one before it finishes (programmatic dependent launch)");
  cmd->add_option("--frontend", o->broker.frontend, "producers' endpoint")->capture_default_str();
  cmd->add_option("--stream", o->broker.stream, "subscribers' endpoint")->capture_default_str();
  cmd->add_option("--http", o->broker.http, "host:port of /metrics, /healthz, /readyz (empty: none)")
      ->capture_default_str();
  cmd->add_option("--gateway", o->gateway, "host:port of the OpenAI-compatible gateway (port 0: any free one; empty: none)")
      ->capture_default_str();
  cmd->add_option("--api-key", o->api_keys, "a key the gateway's clients must send (Authorization: Bearer); repeatable");
  return [cmd, o] {
    if (!*cmd) return;
    o->worker.kv_cache_dtype = parse_kv_cache_dtype(o->kv_cache_dtype);
    run_up(*o);
  };
}

}  // namespace flashq
