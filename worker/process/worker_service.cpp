#include "worker/process/worker_service.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "kernels/backend_factory.h"
#include "shared/cli.h"
#include "shared/curve/curve_socket.h"
#include "shared/error.h"
#include "shared/http/http_endpoint.h"
#include "shared/protocol/job.h"
#include "worker/model/cache_pool.h"
#include "worker/process/host_memory.h"
#include "worker/process/job_runner.h"
#include "worker/process/job_preparer.h"
#include "worker/process/output_thread.h"
#include "worker/process/worker_broker_link.h"
#include "worker/process/worker_metrics.h"
#include "worker/serving/serving_model.h"

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

// The bytes of a checkpoint's weights: its .safetensors files, which the CPU reads in place.
int64_t checkpoint_bytes(const std::string& dir) {
  int64_t bytes = 0;
  if (dir.empty()) return bytes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".safetensors") bytes += static_cast<int64_t>(entry.file_size(ec));
  }
  return bytes;
}

// The default pool in host memory (host_cache_pool_bytes); 0 for none.
int64_t host_pool_bytes(const ServingModel& serving, const WorkerOptions& options) {
  const std::optional<int64_t> available = host_available_bytes();
  if (!available) {
    spdlog::warn("KV cache pool: none (the host's available memory is unknown; --cache-memory-mb sets one)");
    return 0;
  }
  // A position's keys and values in every layer of the target, and the drafter's context rows
  // twice (in the blocks, and in its whole-length contexts): an upper bound of what it takes.
  int64_t position_bytes = serving.model->paged_bytes_per_block(1);
  if (serving.drafter) {
    const ModelConfig& d = serving.drafter->config().layers;
    position_bytes +=
        2 * PagedKvStore::bytes_per_block(d.num_layers, d.num_kv_heads, d.head_dim, 1, serving.model->kv_cache_dtype());
  }
  const int64_t useful = 2 * options.slots * serving.max_model_len() * position_bytes;
  const int64_t weights = checkpoint_bytes(options.model_dir) + checkpoint_bytes(options.drafter_dir);
  const int64_t bytes = host_cache_pool_bytes(options.cpu_memory_fraction, *available, weights, useful);
  if (bytes == 0) {
    spdlog::warn("KV cache pool: none ({} MiB available, {} MiB of weights, --cpu-memory-fraction {}); "
                 "--cache-memory-mb sets one",
                 *available >> 20, weights >> 20, options.cpu_memory_fraction);
  }
  return bytes;
}

// The KV cache pool the options ask for, once the model is loaded (so that what it uses is
// known); null with --cache-memory-mb 0, or when the host has too little memory to spare.
std::unique_ptr<CachePool> make_cache_pool(const ServingModel& serving, const WorkerOptions& options) {
  Backend& backend = *serving.backend;
  int64_t bytes = 0;
  if (options.cache_memory_mb) {
    if (*options.cache_memory_mb < 0) {
      throw Error(ErrorCode::kInvalidArgument, "--cache-memory-mb must not be negative");
    }
    if (*options.cache_memory_mb == 0) {
      spdlog::info("KV cache pool: none (--cache-memory-mb 0)");
      return nullptr;
    }
    bytes = *options.cache_memory_mb << 20;
  } else if (const std::optional<DeviceMemory> memory = backend.memory()) {
    bytes = cache_pool_bytes(options.gpu_memory_fraction, memory->total_bytes, memory->free_bytes);
  } else {
    bytes = host_pool_bytes(serving, options);
    if (bytes == 0) return nullptr;
  }
  auto pool = std::make_unique<CachePool>(backend, bytes);
  spdlog::info("KV cache pool: {} MiB on {}", pool->capacity_bytes() >> 20, backend.name());
  return pool;
}

// The paged KV cache the options ask for, carved from `pool`: null without a pool or with
// --kv-block-size 0. With a drafter
// and prefix caching the blocks keep the drafter's context rows too, and the rest of the pool
// holds the drafter's whole-length contexts: shared so that both hold the same number of
// positions (docs/operations.md, "Sizing the block pool").
std::unique_ptr<PagedKvStore> make_paged_store(const ServingModel& serving, CachePool* pool,
                                               const WorkerOptions& options) {
  if (pool == nullptr || options.kv_block_size == 0) return nullptr;
  const int64_t target_row = serving.model->paged_bytes_per_block(1);
  KvShape draft_rows;
  int64_t drafter_row = 0;
  if (serving.drafter) {
    const ModelConfig& d = serving.drafter->config().layers;
    drafter_row = PagedKvStore::bytes_per_block(d.num_layers, d.num_kv_heads, d.head_dim, 1, serving.model->kv_cache_dtype());
    if (options.prefix_caching) draft_rows = {d.num_layers, d.num_kv_heads, d.head_dim};
  }
  const int64_t store_row = target_row + (draft_rows.layers > 0 ? drafter_row : 0);
  const double share = static_cast<double>(store_row) / static_cast<double>(store_row + drafter_row);
  const auto bytes = static_cast<int64_t>(share * static_cast<double>(pool->capacity_bytes()));
  const int64_t block_bytes = store_row * options.kv_block_size;
  const int64_t blocks = (bytes - CachePool::kAlignment) / block_bytes;
  if (blocks < 1) {
    throw Error(ErrorCode::kInvalidArgument, "the KV cache pool of " + std::to_string(pool->capacity_bytes() >> 20) +
                                                 " MiB holds no block of " + std::to_string(options.kv_block_size) +
                                                 " positions (" + std::to_string(block_bytes) + " bytes)");
  }
  auto store = serving.model->make_paged_store(blocks, options.kv_block_size, pool, draft_rows);
  spdlog::info("KV caches: paged, {} blocks of {} positions ({} positions), prefix caching {}{}", blocks,
               options.kv_block_size, blocks * options.kv_block_size, options.prefix_caching ? "on" : "off",
               draft_rows.layers > 0 ? ", with the drafter's context" : "");
  return store;
}

// What READY says of this worker.
protocol::Ready ready_message(const WorkerOptions& options, const ServingModel& serving) {
  return {.worker_id = options.worker_id,
          .model = options.model_name,
          .slots = options.slots,
          .block_size = serving.block_size(),
          .backend = serving.backend->name(),
          .max_model_len = serving.max_model_len(),
          .tool_call_format = serving.output_format.tool_calls,
          .reasoning_format = serving.output_format.reasoning};
}

// What jobs are checked and prepared against: the model's name, drafter, chat template, and the
// grammars of structured outputs over its token table.
WorkerModel served_model(const WorkerOptions& options, const ServingModel& serving, grammar::GrammarCache& grammars) {
  const ModelConfig& config = serving.model->config();
  const auto table = [&](grammar::SpecialTokens special) {
    return std::make_shared<const grammar::TokenTable>(*serving.tokenizer, config.eos_token_ids,
                                                       static_cast<int32_t>(config.vocab_size), special);
  };
  // Harmony's tool calls are written in special tokens, which strict tools' grammars spell.
  const bool harmony = serving.output_format.tool_calls == protocol::ToolCallFormat::kHarmony;
  return {.name = options.model_name,
          .has_drafter = serving.drafter != nullptr,
          .chat_template = serving.chat_template.chat_template.get(),
          .grammars = &grammars,
          .token_table = table(grammar::SpecialTokens::kNeverAllowed),
          .special_token_table = harmony ? table(grammar::SpecialTokens::kAsText) : nullptr};
}

LinkOptions link_options(const WorkerOptions& options, const protocol::Ready& ready,
                         const std::optional<CurveClientKeys>& curve) {
  return {.endpoint = options.broker,
          .ready = ready,
          .heartbeat_ms = options.heartbeat_ms,
          .liveness = options.liveness,
          .reconnect_min_ms = options.reconnect_min_ms,
          .reconnect_max_ms = std::max(options.reconnect_min_ms, options.reconnect_max_ms),
          .drain_timeout_ms = options.drain_timeout_ms,
          .curve = curve};
}

// Compiled grammars kept for structured outputs: many jobs share a schema.
constexpr size_t kCompiledGrammarsKept = 64;

// A worker thread's loop; an exception escaping it is a bug (the runner turns every job's failure
// into a FINAL, the prepare thread a bad job into a refusal), and the process ends rather than
// serve half-alive.
void run_or_exit(const char* thread, const std::function<void()>& loop) {
  try {
    loop();
  } catch (const std::exception& e) {
    spdlog::critical("{} thread failed: {}", thread, e.what());
    spdlog::shutdown();
    std::_Exit(kExitInternal);
  }
}

}  // namespace

void serve_worker(zmq::context_t& context, WorkerOptions& options, int shutdown_fd) {
  if (options.worker_id.empty()) options.worker_id = default_worker_id();
  if (!protocol::is_valid_id(options.worker_id)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--id '" + options.worker_id + "': 1..128 printable ASCII characters without spaces");
  }
  if (options.model_name.empty()) options.model_name = default_model_name(options.model_dir);
  // Before the model loads: a bad key should not cost a minute of loading first.
  const std::optional<CurveClientKeys> curve =
      load_curve_client_keys(options.curve_server_key, options.curve_secret_key);

  set_programmatic_launches(options.pdl);
  ServingModel serving = ServingModel::load(options.model_dir, options.drafter_dir, options.device);
  serving.set_capture_passes(options.graphs);
  serving.set_kv_cache_dtype(options.kv_cache_dtype);
  const protocol::Ready ready = ready_message(options, serving);
  spdlog::info("worker {}: model {} on {}, {} slots, block size {}, context {}", ready.worker_id, ready.model,
               ready.backend, ready.slots, ready.block_size, ready.max_model_len);

  std::unique_ptr<CachePool> cache_pool = make_cache_pool(serving, options);
  if (cache_pool && serving.proposer) serving.proposer->use_cache_pool(cache_pool.get());
  // Declared before the runner: its sequences' block tables refer to it.
  const std::unique_ptr<PagedKvStore> paged_cache = make_paged_store(serving, cache_pool.get(), options);

  WorkInbox link_inbox;      // I/O thread -> prepare thread
  WorkInbox engine_inbox;    // prepare and output threads -> engine thread
  OutputInbox output_inbox;  // engine thread -> output thread
  MessageOutbox outbox;      // output thread -> I/O thread
  grammar::GrammarCache grammars(kCompiledGrammarsKept);
  const WorkerModel served = served_model(options, serving, grammars);
  WorkerMetrics metrics;
  std::unique_ptr<HttpEndpoint> http;
  if (!options.metrics_http.empty()) {
    // Up once the model is loaded: until then the port refuses, which is what a probe should see.
    http = std::make_unique<HttpEndpoint>(options.metrics_http,
                                          HttpPages{[&metrics] { return metrics.render(); }, [] { return true; }});
    spdlog::info("worker metrics on http://{}", options.metrics_http);
  }
  const EngineOptions caches{
      .cache_pool = cache_pool.get(), .paged_cache = paged_cache.get(), .prefix_caching = options.prefix_caching};
  JobRunner runner(*serving.model, *serving.tokenizer, serving.proposer.get(), served, options.slots, caches,
                   engine_inbox, output_inbox, &metrics);
  JobPreparer preparer(*serving.tokenizer, served, link_inbox, engine_inbox);
  OutputThread output(output_inbox, engine_inbox, outbox);
  std::thread engine_thread(run_or_exit, "engine", [&runner] { runner.run(); });
  std::thread prepare_thread(run_or_exit, "prepare", [&preparer] { preparer.run(); });
  std::thread output_thread(run_or_exit, "output", [&output] { output.run(); });
  struct JoinThreads {
    WorkInbox& inbox;
    std::thread& prepare;
    std::thread& engine;
    std::thread& output;
    ~JoinThreads() {
      inbox.push(StopEngine{});  // through the prepare thread to the engine thread, which ends the output thread
      prepare.join();
      engine.join();
      output.join();
    }
  } join_threads{link_inbox, prepare_thread, engine_thread, output_thread};

  WorkerBrokerLink link(context, link_options(options, ready, curve), link_inbox, outbox, [&runner] { return runner.load(); });
  link.run(shutdown_fd);
  spdlog::info("worker {}: drained, exiting", ready.worker_id);
}

}  // namespace flashq
