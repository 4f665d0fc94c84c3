// flashq-worker: runs the engine on one device and serves jobs from a broker (DESIGN.md §5).
// Two threads: this one becomes the I/O thread (BrokerLink, the only one touching sockets); the
// engine thread (JobRunner) owns the model. SIGTERM or SIGINT drain, and the exit status is 0.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <zmq.hpp>

#include "kernels/backend_factory.h"
#include "shared/cli.h"
#include "shared/error.h"
#include "shared/protocol/job.h"
#include "worker/engine/dflash_proposer.h"
#include "worker/model/dflash_drafter.h"
#include "worker/process/broker_link.h"
#include "worker/process/job_runner.h"
#include "worker/process/worker_options.h"

namespace flashq {
namespace {

std::string default_worker_id() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "worker");
  return std::string(host) + "-" + std::to_string(::getpid());
}

std::string default_model_name(const std::string& model_dir) {
  return std::filesystem::weakly_canonical(std::filesystem::absolute(model_dir)).filename().string();
}

// SIGTERM and SIGINT become readable events on an eventfd the I/O thread polls. A handler
// rather than a blocked mask and a signalfd: libraries start threads of their own before main
// (OpenBLAS does), and a signal may be delivered to any of them.
int g_shutdown_fd = -1;

void on_shutdown_signal(int) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(g_shutdown_fd, &one, sizeof one);  // async-signal-safe
}

int install_shutdown_signals() {
  g_shutdown_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (g_shutdown_fd < 0) throw Error(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
  struct sigaction action = {};
  action.sa_handler = on_shutdown_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal_number : {SIGTERM, SIGINT}) {
    if (::sigaction(signal_number, &action, nullptr) != 0) {
      throw Error(ErrorCode::kIo, std::string("sigaction: ") + std::strerror(errno));
    }
  }
  return g_shutdown_fd;
}

void run_worker(WorkerOptions& options) {
  if (options.worker_id.empty()) options.worker_id = default_worker_id();
  if (!protocol::is_valid_id(options.worker_id)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--id '" + options.worker_id + "': 1..128 printable ASCII characters without spaces");
  }
  if (options.model_name.empty()) options.model_name = default_model_name(options.model_dir);
  const int shutdown_fd = install_shutdown_signals();

  std::unique_ptr<Backend> backend = make_backend(options.device);
  std::unique_ptr<Qwen3Model> model = Qwen3Model::load(options.model_dir, *backend);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.model_dir);
  std::unique_ptr<DFlashDrafter> drafter;
  std::unique_ptr<DFlashProposer> proposer;
  if (!options.drafter_dir.empty()) {
    drafter = DFlashDrafter::load(options.drafter_dir, *model, *backend);
    proposer = std::make_unique<DFlashProposer>(*drafter);
  }
  const protocol::Ready ready{.worker_id = options.worker_id,
                              .model = options.model_name,
                              .slots = options.slots,
                              .block_size = drafter ? drafter->config().block_size : 0,
                              .backend = backend->name()};
  spdlog::info("worker {}: model {} on {}, {} slots, block size {}", ready.worker_id, ready.model, ready.backend,
               ready.slots, ready.block_size);

  WorkInbox inbox;
  MessageOutbox outbox;
  JobRunner runner(*model, *tokenizer, proposer.get(), {options.model_name, drafter != nullptr}, options.slots, inbox,
                   outbox);
  std::thread engine_thread([&runner] {
    try {
      runner.run();
    } catch (const std::exception& e) {  // a bug: JobRunner turns every job's failure into a FINAL
      spdlog::critical("engine thread failed: {}", e.what());
      spdlog::shutdown();
      std::_Exit(kExitInternal);
    }
  });
  struct JoinEngine {
    WorkInbox& inbox;
    std::thread& thread;
    ~JoinEngine() {
      inbox.push(StopEngine{});
      thread.join();
    }
  } join_engine{inbox, engine_thread};

  zmq::context_t context;
  LinkOptions link_options{.endpoint = options.broker,
                           .ready = ready,
                           .heartbeat_ms = options.heartbeat_ms,
                           .liveness = options.liveness,
                           .reconnect_min_ms = options.reconnect_min_ms,
                           .reconnect_max_ms = std::max(options.reconnect_min_ms, options.reconnect_max_ms),
                           .drain_timeout_ms = options.drain_timeout_ms};
  BrokerLink link(context, link_options, inbox, outbox, [&runner] { return runner.load(); });
  link.run(shutdown_fd);
  spdlog::info("worker {}: drained, exiting", ready.worker_id);
}

}  // namespace
}  // namespace flashq

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
  return flashq::run_cli(app, argc, argv, [&] { flashq::run_worker(options); });
}
