#include "tools/flashq_bench/kv_memory_bench.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "worker/model/kv_cache.h"
#include "worker/model/kv_cache_dtype.h"
#include "worker/model/model_config.h"
#include "worker/model/paged_kv_store.h"

namespace flashq {
namespace {

using Json = nlohmann::ordered_json;

struct KvMemoryOptions {
  std::string model_dir;
  std::vector<int64_t> positions = {8192};
  int64_t block_size = 16;
  std::string kv_cache_dtype = "bf16";
  bool json = false;
};

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// What a paged cache holds for a sequence of `positions`: the most blocks at any point of its
// prefill (passes of kMaxRowsPerPass rows) and before its next decode step.
struct PagedHeld {
  int64_t peak_blocks = 0, decode_blocks = 0, block_bytes = 0;
};

PagedHeld paged_held(Backend& backend, const ModelConfig& c, std::vector<int64_t> windows, int64_t positions,
                     int64_t block_size, DType dtype) {
  const auto windowed = static_cast<int64_t>(std::count_if(windows.begin(), windows.end(), [](int64_t w) { return w > 0; }));
  const int64_t slots = std::max(windowed, c.num_layers - windowed);
  const WindowedLayers layers{windowed > 0 ? c.sliding_window : 0, windowed > 0 ? KvCache::kMaxRowsPerPass : 0};
  const int64_t whole_blocks = (positions + block_size) / block_size;  // of positions + 1
  const int64_t blocks = windowed > 0 ? 2 * whole_blocks : whole_blocks;  // room for both kinds
  PagedKvStore store(backend, slots, c.num_kv_heads, c.head_dim, blocks, block_size, nullptr, {}, dtype, layers);
  KvCache cache(store, positions + 1, std::move(windows));
  PagedHeld held{.block_bytes = PagedKvStore::bytes_per_block(slots, c.num_kv_heads, c.head_dim, block_size, dtype)};
  while (cache.length() < positions) {
    const int64_t rows = std::min(KvCache::kMaxRowsPerPass, positions - cache.length());
    cache.reserve(cache.length() + rows);
    held.peak_blocks = std::max(held.peak_blocks, cache.held_blocks());
    cache.commit(rows);
  }
  cache.reserve(positions + 1);
  held.decode_blocks = cache.held_blocks();
  held.peak_blocks = std::max(held.peak_blocks, held.decode_blocks);
  return held;
}

Json measure(Backend& backend, const ModelConfig& c, int64_t positions, int64_t block_size, DType dtype) {
  const std::vector<int64_t> windows = attention_windows(c);
  const auto whole = [&](int64_t length) {
    return KvCache(backend, c.num_layers, c.num_kv_heads, c.head_dim, length, windows, dtype).whole_bytes();
  };
  const PagedHeld every_layer = paged_held(backend, c, {}, positions, block_size, dtype);
  Json figures = {{"positions", positions},
                  {"whole_length_mib", mib(whole(positions))},
                  {"whole_length_model_context_mib", mib(whole(c.max_position_embeddings))},
                  {"paged_every_layer_mib", mib(every_layer.decode_blocks * every_layer.block_bytes)}};
  if (!windows.empty()) {
    const PagedHeld windowed = paged_held(backend, c, windows, positions, block_size, dtype);
    figures["paged_windowed_decode_mib"] = mib(windowed.decode_blocks * windowed.block_bytes);
    figures["paged_windowed_prefill_peak_mib"] = mib(windowed.peak_blocks * windowed.block_bytes);
    figures["paged_windowed_decode_blocks"] = windowed.decode_blocks;
    figures["block_bytes"] = windowed.block_bytes;
  }
  return figures;
}

void run(const KvMemoryOptions& o) {
  const ModelConfig c = load_model_config(o.model_dir);
  const DType dtype = parse_kv_cache_dtype(o.kv_cache_dtype);
  std::unique_ptr<Backend> backend = make_cpu_backend();
  const std::vector<int64_t> windows = attention_windows(c);
  const auto sliding = static_cast<int64_t>(std::count_if(windows.begin(), windows.end(), [](int64_t w) { return w > 0; }));
  Json report = {{"bench", "kv-memory"},
                 {"model", o.model_dir},
                 {"layers", c.num_layers},
                 {"sliding_layers", sliding},
                 {"sliding_window", sliding > 0 ? c.sliding_window : 0},
                 {"kv_heads", c.num_kv_heads},
                 {"head_dim", c.head_dim},
                 {"kv_cache_dtype", std::string(kv_cache_dtype_name(dtype))},
                 {"block_size", o.block_size},
                 {"sequences", Json::array()}};
  for (int64_t positions : o.positions) report["sequences"].push_back(measure(*backend, c, positions, o.block_size, dtype));
  if (o.json) {
    std::cout << report.dump() << "\n";
    return;
  }
  std::printf("kv-memory %s: %lld layers (%lld sliding, window %lld), %lld KV heads of %lld, %s, blocks of %lld\n",
              o.model_dir.c_str(), static_cast<long long>(c.num_layers), static_cast<long long>(sliding),
              static_cast<long long>(report["sliding_window"].get<int64_t>()), static_cast<long long>(c.num_kv_heads),
              static_cast<long long>(c.head_dim), std::string(kv_cache_dtype_name(dtype)).c_str(),
              static_cast<long long>(o.block_size));
  for (const Json& s : report["sequences"]) {
    std::printf("  one sequence of %lld positions, MiB:\n", static_cast<long long>(s["positions"].get<int64_t>()));
    std::printf("    %-58s %10.1f\n", "whole-length caches, sized to the sequence", s["whole_length_mib"].get<double>());
    std::printf("    %-58s %10.1f\n", "whole-length caches, sized to the model's context",
                s["whole_length_model_context_mib"].get<double>());
    std::printf("    %-58s %10.1f\n", "paged, every layer's positions", s["paged_every_layer_mib"].get<double>());
    if (s.contains("paged_windowed_decode_mib")) {
      std::printf("    %-58s %10.1f\n", "paged, sliding layers' window only: decoding",
                  s["paged_windowed_decode_mib"].get<double>());
      std::printf("    %-58s %10.1f\n", "paged, sliding layers' window only: peak of the prefill",
                  s["paged_windowed_prefill_peak_mib"].get<double>());
    }
  }
}

}  // namespace

std::function<void()> add_kv_memory_bench(CLI::App& app) {
  auto options = std::make_shared<KvMemoryOptions>();
  CLI::App* cmd = app.add_subcommand("kv-memory", "KV cache memory of one sequence, whole-length and paged");
  cmd->add_option("--model", options->model_dir, "model directory (its config.json is read)")->required();
  cmd->add_option("--positions", options->positions, "sequence lengths, e.g. 8192,32768")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--kv-block-size", options->block_size, "positions per block")->capture_default_str();
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype, "bf16|float32")->capture_default_str();
  cmd->add_flag("--json", options->json, "one JSON line");
  return [cmd, options] {
    if (*cmd) run(*options);
  };
}

}  // namespace flashq
