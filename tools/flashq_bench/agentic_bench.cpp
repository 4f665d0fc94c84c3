#include "tools/flashq_bench/agentic_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "shared/error.h"
#include "tools/flashq_bench/agentic_conversation.h"
#include "tools/flashq_bench/agentic_routing.h"
#include "tools/flashq_bench/bench_cluster.h"
#include "worker/model/kv_cache_dtype.h"
#include "worker/engine/engine.h"
#include "worker/serving/serving_model.h"
#include "worker/model/cache_pool.h"
#include "worker/model/model_config.h"
#include "worker/model/paged_kv_store.h"
#include "worker/text/load_chat_template.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

struct AgenticBenchOptions {
  std::string model_dir;
  std::string device = "auto";
  std::string figures = "1,2,3,4";
  uint64_t seed = 1;
  bool token_ids = false;
  AgenticShape shape;
  int64_t output_tokens = 32;
  int64_t kv_block_size = 16;
  std::string kv_cache_dtype = "bf16";
  // Figure 1.
  int64_t conversations = 2;
  int64_t turns = 4;
  // Figure 2: sequences of `fill_prompt_tokens` that produce `output_tokens` and may produce
  // max_tokens = 4 (prompt + output) - prompt, in the memory of `fill_whole_fit` whole-length caches.
  int64_t fill_sequences = 48;
  int64_t fill_prompt_tokens = 64;
  int64_t fill_whole_fit = 8;
  int64_t fill_cache_mb = 0;  // the memory, when given (to compare KV dtypes in the same memory)
  // Figure 4.
  std::string decode_batches = "1,16";
  int64_t decode_prompt_tokens = 128;
  int64_t decode_tokens = 32;
  int repeats = 3;
  // Figure 3.
  std::string routing_model_dir;  // default: --model
  int routing_workers = 3;
  int64_t routing_conversations = 32;
  int64_t routing_turns = 6;
  std::string routing_load_gap;  // empty: the broker's default
  int64_t tool_ms = 500;
  int64_t worker_slots = 16;
  int64_t worker_cache_mb = 0;
  std::string bin_dir;
  std::string log_dir = "/tmp/flashq-bench-agentic";
  bool quick = false;
  bool json = false;
};

std::vector<int64_t> split_numbers(const std::string& text, const std::string& flag) {
  std::vector<int64_t> numbers;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ',');) {
    try {
      numbers.push_back(std::stoll(part));
    } catch (const std::exception&) {
      throw Error(ErrorCode::kInvalidArgument, flag + " " + text + ": a comma-separated list of numbers");
    }
  }
  return numbers;
}

// A line on stderr as each arm starts: a full run takes many minutes on a CPU.
void progress(const std::string& what) { std::cerr << "flashq-bench agentic: " << what << std::endl; }

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::vector<int32_t> random_ids(int64_t count, int32_t bound, uint64_t seed) {
  std::vector<int32_t> ids;
  uint64_t state = seed;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(bound)));
  }
  return ids;
}

// A model directory's tokenizer and chat template, and the script they write (for a directory
// the bench does not otherwise load, the routing figure's workers').
struct ScriptSource {
  std::unique_ptr<Tokenizer> tokenizer;
  LoadedChatTemplate chat_template;
  std::unique_ptr<AgenticScript> script;
};

ScriptSource script_for(const std::string& dir, const AgenticBenchOptions& o) {
  ScriptSource s;
  s.tokenizer = load_tokenizer(dir);
  s.chat_template = load_chat_template(dir);
  s.script =
      std::make_unique<AgenticScript>(s.tokenizer.get(), o.token_ids ? nullptr : s.chat_template.chat_template.get(),
                                      s.tokenizer->vocab_size() - 8, o.shape, o.seed);
  return s;
}

// A worker's cache memory for the routing figure, unless given: twice what its share of the
// conversations holds at their longest, so that a worker keeps the conversations it is sent and
// the figure measures where turns go, not how much memory the workers have.
int64_t worker_cache_mb(const std::string& dir, const AgenticScript& script, const AgenticBenchOptions& o) {
  const ModelConfig config = load_model_config(dir);
  const int64_t bytes_per_position = PagedKvStore::bytes_per_block(config.num_layers, config.num_kv_heads,
                                                                   config.head_dim, 1, parse_kv_cache_dtype(o.kv_cache_dtype));
  const AgenticShape& shape = script.shape();
  const int64_t positions = script.system_prompt_tokens() + 64 +
                            o.routing_turns * (shape.tool_result_tokens + shape.user_tokens + o.output_tokens + 128);
  const int64_t share = (o.routing_conversations + o.routing_workers - 1) / o.routing_workers;
  return std::max<int64_t>(4, 2 * share * positions * bytes_per_position / (1 << 20) + 1);
}

// The KV caches an arm's engine runs with.
enum class KvLayout { kWhole, kPaged };

struct CacheArm {
  std::string name;
  KvLayout layout = KvLayout::kWhole;
  bool prefix_caching = false;
  int64_t cache_bytes = 0;  // whole-length caches: their pool (0: each grows on demand); paged: the store
  int64_t block_size = 16;  // paged
};

struct ArmEngine {
  std::unique_ptr<CachePool> pool;
  std::unique_ptr<PagedKvStore> store;
  std::unique_ptr<Engine> engine;
};

// The bytes of a paged store holding `positions` positions in blocks of `block_size`.
int64_t paged_bytes(const ServingModel& serving, int64_t positions, int64_t block_size) {
  return (positions + block_size - 1) / block_size * serving.model->paged_bytes_per_block(block_size);
}

ArmEngine make_engine(ServingModel& serving, const CacheArm& arm, int64_t max_slots,
                      std::function<void(const StepEvent&)> on_event = {}) {
  ArmEngine e;
  EngineOptions options{.max_slots = max_slots, .on_event = std::move(on_event)};
  if (arm.layout == KvLayout::kPaged) {
    // As many blocks as the bytes hold: the same memory as the whole-length arm's pool.
    const int64_t blocks = arm.cache_bytes / serving.model->paged_bytes_per_block(arm.block_size);
    e.store = serving.model->make_paged_store(blocks, arm.block_size);
    options.paged_cache = e.store.get();
    options.prefix_caching = arm.prefix_caching;
  } else if (arm.cache_bytes > 0) {
    e.pool = std::make_unique<CachePool>(*serving.backend, arm.cache_bytes);
    options.cache_pool = e.pool.get();
  }
  e.engine = std::make_unique<Engine>(*serving.model, nullptr, options);
  // One short sequence first: pages the weights in, so no arm pays for it in a timed turn.
  SequenceRequest warm;
  warm.generation.prompt_tokens = random_ids(8, 64, 99);
  warm.generation.max_tokens = 2;
  warm.spec = SpecMode::kOff;
  e.engine->add(1ull << 40, std::move(warm));
  e.engine->run_until_idle();
  (void)e.engine->take_finished();
  return e;
}

SequenceRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  SequenceRequest r;
  r.generation.prompt_tokens = std::move(prompt);
  r.generation.max_tokens = max_tokens;
  r.generation.ignore_eos = true;
  r.spec = SpecMode::kOff;
  return r;
}

// ---- Figure 1: time to first token of later turns, prefix cache on against off.

// One turn in an engine that runs nothing else, so that its time to first token is its prefill.
FinishedSequence run_turn(Engine& engine, uint64_t id, const std::vector<int32_t>& prompt, int64_t output_tokens) {
  engine.add(id, greedy_request(prompt, output_tokens));
  engine.run_until_idle();
  std::vector<FinishedSequence> done = engine.take_finished();
  check_invariant(done.size() == 1, "one turn in, one turn out");
  return std::move(done[0]);
}

Json figure_prefix_cache(ServingModel& serving, const AgenticScript& script, const AgenticBenchOptions& o) {
  // Room for every conversation's every turn, so that nothing cached is evicted: the figure is
  // what a hit saves, not how the cache chooses what to keep.
  const AgenticShape& shape = script.shape();
  const int64_t positions = script.system_prompt_tokens() + 64 +
                            o.turns * (shape.tool_result_tokens + shape.user_tokens + o.output_tokens + 128);
  const int64_t bytes = paged_bytes(serving, o.conversations * positions * 5 / 4, o.kv_block_size);
  const std::vector<CacheArm> arms = {{"prefix cache off", KvLayout::kPaged, false, bytes, o.kv_block_size},
                                      {"prefix cache on", KvLayout::kPaged, true, bytes, o.kv_block_size}};
  std::vector<ArmEngine> engines;
  for (const CacheArm& arm : arms) engines.push_back(make_engine(serving, arm, 1));

  // Turn by turn, the conversations taking turns; each turn runs in both engines, one right after
  // the other (so a slow minute on a shared machine hits both), the conversation going on with
  // the first engine's output.
  progress("figure 1, " + std::to_string(o.conversations) + " conversations x " + std::to_string(o.turns) + " turns");
  std::vector<AgenticConversation> conversations;
  for (int64_t c = 0; c < o.conversations; ++c) conversations.emplace_back(script, c);
  std::vector<std::vector<double>> first_ttft(arms.size()), later_ttft(arms.size());
  std::vector<double> ratios;
  bool identical = true, extends = true;
  int64_t later_prompt_tokens = 0, later_turns = 0, last_prompt_tokens = 0;
  uint64_t id = 0;
  for (int64_t turn = 0; turn < o.turns; ++turn) {
    for (AgenticConversation& conversation : conversations) {
      const std::vector<int32_t> prompt = conversation.prompt();
      std::vector<FinishedSequence> done;
      for (ArmEngine& e : engines) done.push_back(run_turn(*e.engine, id, prompt, o.output_tokens));
      ++id;
      for (size_t a = 0; a < arms.size(); ++a) {
        (turn == 0 ? first_ttft : later_ttft)[a].push_back(done[a].time_to_first_token_s);
        identical = identical && done[a].tokens == done[0].tokens;
      }
      if (turn > 0) {
        ratios.push_back(done[0].time_to_first_token_s / done[1].time_to_first_token_s);
        later_prompt_tokens += static_cast<int64_t>(prompt.size());
        ++later_turns;
      }
      last_prompt_tokens = static_cast<int64_t>(prompt.size());
      // The next turn must extend this one, prompt and output, token for token.
      std::vector<int32_t> before = prompt;
      before.insert(before.end(), done[0].tokens.begin(), done[0].tokens.end());
      conversation.add_turn(done[0].tokens);
      extends = extends && conversation.prompt().size() > before.size() &&
                std::equal(before.begin(), before.end(), conversation.prompt().begin());
    }
  }
  Json figure = {
      {"text", script.mode()},
      {"conversations", o.conversations},
      {"turns", o.turns},
      {"output_tokens", o.output_tokens},
      {"system_prompt_tokens", script.system_prompt_tokens()},
      {"later_prompts_extend_earlier_turns", extends},
      {"later_turn_prompt_tokens_mean", static_cast<double>(later_prompt_tokens) / static_cast<double>(later_turns)},
      {"last_prompt_tokens", last_prompt_tokens},
      {"arms", Json::array()}};
  for (size_t a = 0; a < arms.size(); ++a) {
    const PagedCacheStats stats = engines[a].engine->cache_stats().value();
    figure["arms"].push_back({{"name", arms[a].name},
                              {"first_turn_ttft_s", median(first_ttft[a])},
                              {"later_turn_ttft_s", median(later_ttft[a])},
                              {"later_turn_ttft_s_each", later_ttft[a]},
                              {"prefix_lookup_tokens", stats.blocks.lookup_tokens},
                              {"prefix_hit_tokens", stats.blocks.hit_tokens},
                              {"kv_blocks", stats.blocks.blocks}});
  }
  // The median of the later turns' ratios, each of two runs taken side by side.
  figure["later_turn_ttft_ratio"] = median(ratios);
  figure["outputs_identical"] = identical;
  return figure;
}

// ---- Figure 2: sequences decoding at once in a fixed cache memory.

Json figure_concurrency(ServingModel& serving, const AgenticBenchOptions& o) {
  const int64_t produce = o.output_tokens;
  const int64_t max_tokens = 4 * (o.fill_prompt_tokens + produce) - o.fill_prompt_tokens;
  const int64_t whole_bytes =
      CachePool::footprint(serving.model->make_cache(o.fill_prompt_tokens + max_tokens).whole_bytes());
  const int64_t cache_bytes = o.fill_cache_mb > 0 ? (o.fill_cache_mb << 20) : o.fill_whole_fit * whole_bytes;
  const std::vector<CacheArm> arms = {{"whole-length caches", KvLayout::kWhole, false, cache_bytes},
                                      {"paged caches", KvLayout::kPaged, false, cache_bytes, o.kv_block_size}};
  Json figure = {{"sequences", o.fill_sequences},
                 {"prompt_tokens", o.fill_prompt_tokens},
                 {"output_tokens", produce},
                 {"max_tokens", max_tokens},
                 {"used_fraction_of_max_length", static_cast<double>(o.fill_prompt_tokens + produce) /
                                                     static_cast<double>(o.fill_prompt_tokens + max_tokens)},
                 {"cache_bytes", cache_bytes},
                 {"arms", Json::array()}};
  std::vector<int64_t> peaks;
  for (const CacheArm& arm : arms) {
    // Each sequence is stopped once it has produced its tokens, as a client stops one at a stop
    // string: it may grow to max_tokens, and uses a quarter of that.
    progress("figure 2, " + arm.name);
    std::map<uint64_t, int64_t> produced;
    Engine* engine = nullptr;
    ArmEngine e = make_engine(serving, arm, o.fill_sequences, [&](const StepEvent& event) {
      int64_t& n = produced[event.id];
      n += static_cast<int64_t>(event.token_ids.size());
      if (n >= produce && !event.finished && engine) engine->cancel(event.id);
    });
    engine = e.engine.get();
    for (int64_t i = 0; i < o.fill_sequences; ++i) {
      SequenceRequest r = greedy_request(random_ids(o.fill_prompt_tokens, serving.tokenizer->vocab_size() - 8,
                                                    o.seed * 7919 + static_cast<uint64_t>(i)),
                                         max_tokens);
      engine->add(static_cast<uint64_t>(i), std::move(r));
    }
    int64_t peak = 0, steps = 0;
    const auto start = Clock::now();
    while (!engine->idle()) {
      engine->step();
      ++steps;
      peak = std::max<int64_t>(peak, static_cast<int64_t>(engine->running()));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    int64_t tokens = 0;
    for (const FinishedSequence& f : engine->take_finished()) tokens += static_cast<int64_t>(f.tokens.size());
    peaks.push_back(peak);
    Json result = {{"name", arm.name},
                   {"peak_running", peak},
                   {"steps", steps},
                   {"seconds", seconds},
                   {"output_tokens_per_s", static_cast<double>(tokens) / seconds}};
    if (const std::optional<PagedCacheStats> stats = engine->cache_stats()) {
      result["kv_blocks"] = stats->blocks.blocks;
      result["preemptions"] = stats->preemptions;
    }
    figure["arms"].push_back(result);
  }
  figure["peak_running_ratio"] = static_cast<double>(peaks[1]) / static_cast<double>(peaks[0]);
  return figure;
}

// ---- Figure 4: decode speed, paged against whole-length caches.

// Decode tokens/s of `batch` sequences at once: tokens after each one's first over the time
// after prefill.
double decode_speed(Engine& engine, int64_t batch, const AgenticBenchOptions& o, int32_t ordinary) {
  for (int64_t i = 0; i < batch; ++i) {
    engine.add(static_cast<uint64_t>(i),
               greedy_request(random_ids(o.decode_prompt_tokens, ordinary, o.seed * 104729 + static_cast<uint64_t>(i)),
                              o.decode_tokens));
  }
  const double prefill_before = engine.phase_seconds().prefill;
  const auto start = Clock::now();
  engine.run_until_idle();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count() - (engine.phase_seconds().prefill - prefill_before);
  int64_t tokens = 0;
  for (const FinishedSequence& f : engine.take_finished()) tokens += static_cast<int64_t>(f.tokens.size()) - 1;
  return static_cast<double>(tokens) / seconds;
}

Json figure_decode_speed(ServingModel& serving, const AgenticBenchOptions& o) {
  const int32_t ordinary = serving.tokenizer->vocab_size() - 8;
  Json figure = {{"prompt_tokens", o.decode_prompt_tokens},
                 {"decode_tokens", o.decode_tokens},
                 {"repeats", o.repeats},
                 {"batches", Json::array()}};
  for (int64_t batch : split_numbers(o.decode_batches, "--decode-batches")) {
    if (batch < 1) throw Error(ErrorCode::kInvalidArgument, "--decode-batches: each batch must be positive");
    // Whole-length caches as a worker without a pool has them (each grows on demand); paged ones
    // in a store with room for every sequence, without prefix caching (each repeat decodes the
    // same prompts, and prefill is not what this figure times).
    const int64_t per_sequence = o.decode_prompt_tokens + o.decode_tokens + 2 * o.kv_block_size;
    const std::vector<CacheArm> arms = {{"whole-length caches", KvLayout::kWhole, false, 0},
                                        {"paged caches", KvLayout::kPaged, false,
                                         paged_bytes(serving, batch * per_sequence, o.kv_block_size), o.kv_block_size}};
    progress("figure 4, batch " + std::to_string(batch));
    std::vector<ArmEngine> engines;
    for (const CacheArm& arm : arms) engines.push_back(make_engine(serving, arm, batch));
    // The arms take turns within each repeat, so a slow minute on a shared machine hits both.
    std::vector<std::vector<double>> speeds(arms.size());
    std::vector<double> ratios;
    for (int r = 0; r < o.repeats; ++r) {
      for (size_t a = 0; a < arms.size(); ++a)
        speeds[a].push_back(decode_speed(*engines[a].engine, batch, o, ordinary));
      ratios.push_back(speeds[1].back() / speeds[0].back());
    }
    figure["batches"].push_back({{"batch", batch},
                                 {"whole_tokens_per_s", median(speeds[0])},
                                 {"paged_tokens_per_s", median(speeds[1])},
                                 {"paged_over_whole", median(ratios)}});
  }
  return figure;
}

// ---- The report.

std::string number_or_dash(const Json& value, const char* format) {
  if (!value.is_number()) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value.get<double>());
  return buffer;
}

void print_table(const Json& r) {
  std::printf("\n%-58s %s\n", "figure", "value");
  if (r.contains("prefix_cache")) {
    const Json& f = r["prefix_cache"];
    std::printf("1. time to first token, later turns (%lld conversations x %lld turns, system prompt %lld tokens)\n",
                static_cast<long long>(f["conversations"].get<int64_t>()),
                static_cast<long long>(f["turns"].get<int64_t>()),
                static_cast<long long>(f["system_prompt_tokens"].get<int64_t>()));
    for (const Json& arm : f["arms"]) {
      std::printf("   %-55s %s s (first turns %s s)\n", arm["name"].get<std::string>().c_str(),
                  number_or_dash(arm["later_turn_ttft_s"], "%.3f").c_str(),
                  number_or_dash(arm["first_turn_ttft_s"], "%.3f").c_str());
    }
    std::printf("   %-55s %sx\n", "off / on", number_or_dash(f["later_turn_ttft_ratio"], "%.1f").c_str());
  }
  if (r.contains("concurrency")) {
    const Json& f = r["concurrency"];
    std::printf("2. sequences decoding at once in %.1f MiB (%lld sequences, %.0f%% of max length used)\n",
                f["cache_bytes"].get<double>() / 1048576.0, static_cast<long long>(f["sequences"].get<int64_t>()),
                100 * f["used_fraction_of_max_length"].get<double>());
    for (const Json& arm : f["arms"]) {
      std::printf("   %-55s %lld\n", arm["name"].get<std::string>().c_str(),
                  static_cast<long long>(arm["peak_running"].get<int64_t>()));
    }
    std::printf("   %-55s %sx\n", "paged / whole-length", number_or_dash(f["peak_running_ratio"], "%.2f").c_str());
  }
  if (r.contains("routing")) {
    const Json& f = r["routing"];
    std::printf("3. %d workers, %lld conversations x %lld turns\n", f["workers"].get<int>(),
                static_cast<long long>(f["conversations"].get<int64_t>()),
                static_cast<long long>(f["turns"].get<int64_t>()));
    for (const Json& arm : f["arms"]) {
      const Json& rate = arm["later_turn_prefix_hit_rate"];
      const Json& reusable = arm.contains("reusable_hit_rate") ? arm["reusable_hit_rate"] : Json();
      std::printf("   %-55s hit rate %s%% (%s%% of the reusable), %.1f completion tokens/s, %.2f turns/s\n",
                  ("--routing " + arm["routing"].get<std::string>()).c_str(),
                  rate.is_number() ? number_or_dash(Json(100 * rate.get<double>()), "%.1f").c_str() : "-",
                  reusable.is_number() ? number_or_dash(Json(100 * reusable.get<double>()), "%.1f").c_str() : "-",
                  arm["completion_tokens_per_s"].get<double>(), arm["turns_per_s"].get<double>());
    }
  }
  if (r.contains("decode_speed")) {
    std::printf("4. decode tokens/s, whole-length / paged caches\n");
    for (const Json& row : r["decode_speed"]["batches"]) {
      std::printf("   batch %-49lld %s / %s (paged/whole %s)\n", static_cast<long long>(row["batch"].get<int64_t>()),
                  number_or_dash(row["whole_tokens_per_s"], "%.1f").c_str(),
                  number_or_dash(row["paged_tokens_per_s"], "%.1f").c_str(),
                  number_or_dash(row["paged_over_whole"], "%.3f").c_str());
    }
  }
}

void apply_quick(AgenticBenchOptions& o) {
  o.shape = {.system_tokens = 160, .tool_result_tokens = 40, .user_tokens = 8};
  o.output_tokens = 4;
  o.conversations = 2;
  o.turns = 3;
  o.fill_sequences = 12;
  o.fill_prompt_tokens = 12;
  o.fill_whole_fit = 2;
  o.decode_batches = "1,4";
  o.decode_prompt_tokens = 16;
  o.decode_tokens = 6;
  o.repeats = 1;
  o.routing_conversations = 6;
  o.routing_turns = 2;
  o.worker_slots = 4;
  o.tool_ms = 10;
}

void run_agentic_bench(AgenticBenchOptions o) {
  if (o.quick) apply_quick(o);
  if (o.output_tokens < 2 || o.conversations < 1 || o.turns < 2 || o.fill_sequences < 1 || o.fill_prompt_tokens < 1 ||
      o.fill_whole_fit < 1 || o.decode_prompt_tokens < 1 || o.decode_tokens < 2 || o.repeats < 1 ||
      o.kv_block_size < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--output-tokens and --decode-tokens (at least 2), --turns (at least 2), --conversations, "
                "--fill-sequences, --fill-prompt-tokens, --fill-whole-fit, --decode-prompt-tokens, --repeats and "
                "--kv-block-size must be positive");
  }
  std::map<int64_t, bool> figures;
  for (int64_t f : split_numbers(o.figures, "--figures")) {
    if (f < 1 || f > 4) throw Error(ErrorCode::kInvalidArgument, "--figures: numbers 1 to 4");
    figures[f] = true;
  }
  Json report = {{"model", o.model_dir}, {"kv_block_size", o.kv_block_size}, {"kv_cache_dtype", o.kv_cache_dtype}};
  if (figures.count(1) || figures.count(2) || figures.count(4)) {
    ServingModel serving = ServingModel::load(o.model_dir, "", o.device);
    serving.set_kv_cache_dtype(parse_kv_cache_dtype(o.kv_cache_dtype));
    report["backend"] = serving.backend->name();
    AgenticScript script(serving.tokenizer.get(), o.token_ids ? nullptr : serving.chat_template.chat_template.get(),
                         serving.tokenizer->vocab_size() - 8, o.shape, o.seed);
    if (figures.count(1)) report["prefix_cache"] = figure_prefix_cache(serving, script, o);
    if (figures.count(2)) report["concurrency"] = figure_concurrency(serving, o);
    if (figures.count(4)) report["decode_speed"] = figure_decode_speed(serving, o);
  }
  if (figures.count(3)) {
    RoutingFigureOptions routing;
    routing.bin_dir = o.bin_dir.empty() ? bench::executable_dir() : std::filesystem::path(o.bin_dir);
    routing.log_dir = o.log_dir;
    routing.model_dir = o.routing_model_dir.empty() ? o.model_dir : o.routing_model_dir;
    routing.workers = o.routing_workers;
    routing.conversations = o.routing_conversations;
    routing.turns = o.routing_turns;
    routing.output_tokens = o.output_tokens;
    routing.seed = o.seed;
    routing.tool_ms = o.tool_ms;
    routing.load_gap = o.routing_load_gap;
    const ScriptSource source = script_for(routing.model_dir, o);
    const int64_t cache_mb =
        o.worker_cache_mb > 0 ? o.worker_cache_mb : worker_cache_mb(routing.model_dir, *source.script, o);
    routing.worker_args = {"--slots",           std::to_string(o.worker_slots),
                           "--device",          o.device == "auto" ? "cpu" : o.device,
                           "--cache-memory-mb", std::to_string(cache_mb),
                           "--kv-block-size",   std::to_string(o.kv_block_size),
                           "--kv-cache-dtype",  o.kv_cache_dtype,
                           "--prefix-caching",  "on"};
    report["routing"] = measure_routing(routing, *source.script);
    report["routing"]["text"] = source.script->mode();
  }
  std::cout << (o.json ? report.dump() : report.dump(2)) << std::endl;
  if (!o.json) print_table(report);
}

}  // namespace

std::function<void()> add_agentic_bench(CLI::App& app) {
  auto o = std::make_shared<AgenticBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "agentic",
      "agentic conversations: prefix cache, paged caches' concurrency and decode speed, cache-aware routing");
  cmd->add_option("--model", o->model_dir, "target model directory")->required();
  cmd->add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--figures", o->figures, "which figures: 1 prefix cache, 2 concurrency, 3 routing, 4 decode speed")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the conversations and prompts")->capture_default_str();
  cmd->add_flag("--token-ids", o->token_ids, "random token ids instead of the chat template's text");
  cmd->add_option("--system-tokens", o->shape.system_tokens, "the shared system prompt with its tools, at least")
      ->capture_default_str();
  cmd->add_option("--tool-result-tokens", o->shape.tool_result_tokens, "each turn's tool result, at least")
      ->capture_default_str();
  cmd->add_option("--user-tokens", o->shape.user_tokens, "each user message, about")->capture_default_str();
  cmd->add_option("--output-tokens", o->output_tokens, "tokens the model writes per turn (greedy)")
      ->capture_default_str();
  cmd->add_option("--kv-block-size", o->kv_block_size, "positions per block of the paged caches")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "bf16|float32: the KV caches' element type")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "float32"}));
  cmd->add_option("--conversations", o->conversations, "figure 1: conversations")->capture_default_str();
  cmd->add_option("--turns", o->turns, "figure 1: turns per conversation")->capture_default_str();
  cmd->add_option("--fill-sequences", o->fill_sequences, "figure 2: sequences submitted at once")
      ->capture_default_str();
  cmd->add_option("--fill-prompt-tokens", o->fill_prompt_tokens, "figure 2: each sequence's prompt")
      ->capture_default_str();
  cmd->add_option("--fill-cache-mb", o->fill_cache_mb,
                  "figure 2: the cache memory in MiB (0: what --fill-whole-fit whole-length caches take)")
      ->capture_default_str();
  cmd->add_option("--fill-whole-fit", o->fill_whole_fit, "figure 2: whole-length caches the fixed memory holds")
      ->capture_default_str();
  cmd->add_option("--decode-batches", o->decode_batches, "figure 4: sequences at once, e.g. 1,16")
      ->capture_default_str();
  cmd->add_option("--decode-prompt-tokens", o->decode_prompt_tokens, "figure 4: each sequence's prompt")
      ->capture_default_str();
  cmd->add_option("--decode-tokens", o->decode_tokens, "figure 4: tokens per sequence")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "figure 4: runs per arm; the median is reported")->capture_default_str();
  cmd->add_option("--routing-model", o->routing_model_dir, "figure 3: the workers' model (default: --model)");
  cmd->add_option("--routing-workers", o->routing_workers, "figure 3: flashq-worker processes")->capture_default_str();
  cmd->add_option("--routing-conversations", o->routing_conversations, "figure 3: conversations")
      ->capture_default_str();
  cmd->add_option("--routing-turns", o->routing_turns, "figure 3: turns per conversation")->capture_default_str();
  cmd->add_option("--routing-load-gap", o->routing_load_gap,
                  "figure 3: the broker's --routing-load-gap (default: the broker's own)");
  cmd->add_option("--tool-ms", o->tool_ms, "figure 3: a tool call's mean time between a turn and the next")
      ->capture_default_str();
  cmd->add_option("--worker-slots", o->worker_slots, "figure 3: each worker's --slots")->capture_default_str();
  cmd->add_option(
         "--worker-cache-mb", o->worker_cache_mb,
         "figure 3: each worker's --cache-memory-mb (0: twice its share of the conversations at their longest)")
      ->capture_default_str();
  cmd->add_option("--bin-dir", o->bin_dir,
                  "figure 3: where flashq-broker and flashq-worker are (default: beside this)");
  cmd->add_option("--log-dir", o->log_dir, "figure 3: the processes' logs")->capture_default_str();
  cmd->add_flag("--quick", o->quick, "a short run of every figure on small conversations (a smoke test)");
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_agentic_bench(*o);
  };
}

}  // namespace flashq
