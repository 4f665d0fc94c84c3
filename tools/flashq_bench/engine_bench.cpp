#include "tools/flashq_bench/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "worker/engine/engine.h"
#include "worker/engine/row_argmax.h"
#include "worker/model/kv_cache_dtype.h"
#include "worker/model/safetensors.h"
#include "worker/serving/serving_model.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

struct EngineBenchOptions {
  std::string model_dir;
  std::string drafter_dir;
  std::string modes = "ar";
  std::string concurrency = "1";
  std::string device = "auto";
  std::string kv_cache_dtype = "bf16";
  int64_t prompt_tokens = 259;
  int64_t decode_tokens = 64;
  int64_t block_size = 0;
  int repeats = 3;
  uint64_t seed = 1;
  std::string prompts_file;  // JSONL of prompt texts; empty: random token prompts
  bool passes = false;
  bool json = false;
  bool graphs = false;
  bool pdl = false;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  return parts;
}

// Bytes of weights one decode step reads: every matrix once (a tied LM head is the embedding; an
// untied embedding gives one row), and of a layer's experts the share one token routes to: k of
// E (MXFP4 blocks and scales as stored). A multimodal checkpoint's vision tower and a
// multi-token-prediction head are not read.
int64_t recurrent_state_bytes(const TargetModel& model) {
  const KvCache cache = model.make_cache(1);
  return cache.recurrent() != nullptr ? cache.recurrent()->state_bytes() : 0;
}

size_t weight_bytes(const std::string& dir, const ModelConfig& config) {
  WeightStore weights = WeightStore::open(dir);
  const bool untied_embedding = weights.contains("lm_head.weight");
  double bytes = 0;
  for (const std::string& name : weights.names()) {
    if (name.starts_with("model.visual.") || name.starts_with("mtp.")) continue;
    const auto tensor_bytes = static_cast<double>(weights.get(name).nbytes());
    if (untied_embedding && name.ends_with("embed_tokens.weight")) {
      bytes += tensor_bytes / static_cast<double>(config.vocab_size);
    } else if (name.find(".mlp.experts.") != std::string::npos && config.moe.num_experts > 0) {
      bytes += tensor_bytes * static_cast<double>(config.moe.experts_per_token) /
               static_cast<double>(config.moe.num_experts);
    } else {
      bytes += tensor_bytes;
    }
  }
  return static_cast<size_t>(bytes);
}

// The value below which a fraction q of `values` lie (nearest rank); 0 for none.
double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())))];
}

double median(std::vector<double> values) { return quantile(std::move(values), 0.5); }

std::vector<int32_t> random_prompt(int64_t length, int64_t ordinary, uint64_t seed) {
  std::vector<int32_t> prompt;
  uint64_t state = seed;
  for (int64_t i = 0; i < length; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    prompt.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(ordinary)));
  }
  return prompt;
}

// One prompt per line: a JSON string, or an object with "prompt". Tokenized as a worker would.
std::vector<std::vector<int32_t>> read_prompts(const std::string& path, const Tokenizer& tokenizer) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, path + ": cannot open the prompts file");
  std::vector<std::vector<int32_t>> prompts;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json value = nlohmann::json::parse(line, nullptr, false);
    const nlohmann::json* text = value.is_object() && value.contains("prompt") ? &value["prompt"] : &value;
    if (!text->is_string() || text->get<std::string>().empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  path + ":" + std::to_string(line_number) + ": not a prompt (a JSON string or {\"prompt\": string})");
    }
    prompts.push_back(tokenizer.encode_with_special_tokens(text->get<std::string>()));
  }
  if (prompts.empty()) throw Error(ErrorCode::kInvalidArgument, path + ": no prompts");
  return prompts;
}

struct Bench {
  const EngineBenchOptions& o;
  ServingModel serving;
  int64_t ordinary = 0;
  std::vector<std::vector<int32_t>> prompts;  // from --prompts
  // Each sequence's time between one step's tokens and the next's: a decode step as a sequence
  // sees it. Its median says what a step costs when nothing else on the machine interferes; the
  // mean (decode_tokens_per_s) also counts the steps a preempted thread stalled (perf.md).
  std::map<uint64_t, Clock::time_point> last_event;
  std::vector<double> step_seconds;

  // Sequence `i` of round `round`: every mode gets the same prompts in the same round.
  std::vector<int32_t> prompt_for(int round, int64_t concurrency, int64_t i) const {
    if (prompts.empty()) return random_prompt(o.prompt_tokens, ordinary, o.seed + static_cast<uint64_t>(i));
    return prompts[static_cast<size_t>((round * concurrency + i) % static_cast<int64_t>(prompts.size()))];
  }

  // An engine lives as long as a worker: its speculation policy keeps what it measured.
  std::unique_ptr<Engine> make_engine(const std::string& mode, int64_t concurrency) {
    EngineOptions options{.max_slots = concurrency};
    options.on_event = [this](const StepEvent& event) {
      const auto now = Clock::now();
      auto [last, first] = last_event.try_emplace(event.id, now);
      if (!first) step_seconds.push_back(std::chrono::duration<double>(now - last->second).count());
      last->second = now;
    };
    return std::make_unique<Engine>(*serving.model, mode == "ar" ? nullptr : serving.proposer.get(), options);
  }

  // One run of `concurrency` sequences; decode speed counts tokens after each one's first.
  nlohmann::json run(Engine& engine, const std::string& mode, int64_t concurrency, int round) {
    const bool speculative = mode != "ar";
    for (int64_t i = 0; i < concurrency; ++i) {
      SequenceRequest r;
      r.generation.prompt_tokens = prompt_for(round, concurrency, i);
      r.generation.max_tokens = o.decode_tokens;
      r.generation.ignore_eos = true;
      r.spec = mode == "ar" ? SpecMode::kOff : parse_spec_mode(mode);
      r.block_size = speculative ? o.block_size : 0;
      engine.add(static_cast<uint64_t>(i), std::move(r));
    }
    last_event.clear();
    step_seconds.clear();
    const PhaseSeconds before = engine.phase_seconds();
    const auto start = Clock::now();
    engine.run_until_idle();
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    const PhaseSeconds& after = engine.phase_seconds();
    const PhaseSeconds phases{.prefill = after.prefill - before.prefill,
                              .draft = after.draft - before.draft,
                              .verify = after.verify - before.verify,
                              .other = after.other - before.other};
    int64_t tokens = 0, passes = 0, committed = 0, prompt = 0, draft_steps = 0;
    for (const FinishedSequence& done : engine.take_finished()) {
      tokens += static_cast<int64_t>(done.tokens.size()) - 1;
      passes += done.spec_stats.target_passes;
      committed += done.spec_stats.committed_tokens;
      prompt += done.prompt_tokens;
      draft_steps += done.spec_stats.draft_steps;
    }
    const double decode_seconds = total - phases.prefill;
    return {
        {"mode", mode},
        {"concurrency", concurrency},
        {"prefill_tokens_per_s", phases.prefill > 0 ? prompt / phases.prefill : 0.0},
        {"decode_tokens_per_s", decode_seconds > 0 ? tokens / decode_seconds : 0.0},
        {"tau", passes > 0 ? static_cast<double>(committed) / static_cast<double>(passes) : 0.0},
        {"target_passes", passes},
        {"draft_steps", draft_steps},
        {"step_ms", {{"median", quantile(step_seconds, 0.5) * 1e3}, {"p90", quantile(step_seconds, 0.9) * 1e3}}},
        {"seconds",
         {{"prefill", phases.prefill}, {"draft", phases.draft}, {"verify", phases.verify}, {"other", phases.other}}}};
  }

  // Median seconds of one target pass of `rows` tokens on a cache holding the prompt.
  // A hybrid target's pass includes its recurrent state's handling (recurrent_state.h): a block
  // of B rows keeps the state before it, and is truncated to half of it (as a verification that
  // accepts half), whose replay the next pass runs; a decode row is not truncated (the cache
  // grows a row a repeat).
  double time_target_pass(int64_t rows, bool with_taps = false) {
    KvCache cache = serving.model->make_cache(o.prompt_tokens + (o.repeats + 2) * rows + 32);
    const bool recurrent = cache.recurrent() != nullptr;
    std::vector<int32_t> prompt = random_prompt(o.prompt_tokens, ordinary, o.seed);
    SequenceChunk chunk{prompt, &cache};
    serving.model->forward({&chunk, 1}, {});
    std::vector<int32_t> block = random_prompt(rows, ordinary, o.seed + 99);
    std::vector<double> times;
    for (int r = 0; r < o.repeats + 1; ++r) {
      SequenceChunk step{block, &cache};
      const auto start = Clock::now();
      ForwardOptions forward{.logits = LogitRows::kAll};
      if (with_taps) forward.tap_layers = serving.drafter->config().target_layer_ids;
      serving.model->forward({&step, 1}, forward);
      times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      if (!recurrent) {
        cache.truncate(o.prompt_tokens);
      } else if (rows > 1) {
        cache.truncate(cache.length() - rows + rows / 2);
      }
    }
    times.erase(times.begin());  // warm-up
    return median(times);
  }

  // A draft pass's median time, and for DFlash2 its candidate selector's (greedy, included).
  struct DraftTimes {
    double pass = 0, selector = 0;
  };
  DraftTimes time_draft_pass(int64_t block) {
    KvCache context = serving.drafter->make_context_cache(o.prompt_tokens + 32);
    Tensor taps = serving.backend->allocate(
        DType::kF32, {o.prompt_tokens, static_cast<int64_t>(serving.drafter->config().target_layer_ids.size()) *
                                           serving.model->config().hidden_size});
    ContextChunk chunk{taps, &context, 0};
    serving.drafter->inject({&chunk, 1});
    std::vector<double> times, selector_times;
    RowArgmax row_argmax;
    CandidateSelector* selector = serving.drafter->selector();
    for (int r = 0; r < o.repeats + 1; ++r) {
      DraftBlock request{1, block, &context, o.prompt_tokens};
      const auto start = Clock::now();
      const Tensor logits = serving.drafter->draft({&request, 1});
      const auto selector_start = Clock::now();
      if (selector != nullptr) {
        const SelectorBlock walk{1, block - 1, 0.0f, {}};
        selector->select(serving.drafter->last_hidden(), logits, {&walk, 1});
      } else {
        row_argmax(*serving.backend, logits);  // DFlash's choice, as its proposer makes it
      }
      const auto end = Clock::now();
      times.push_back(std::chrono::duration<double>(end - start).count());
      selector_times.push_back(std::chrono::duration<double>(end - selector_start).count());
    }
    times.erase(times.begin());
    selector_times.erase(selector_times.begin());
    return {median(times), selector != nullptr ? median(selector_times) : 0.0};
  }
};

// The modes asked for, checked with the other counts (kInvalidArgument naming the flag).
std::vector<std::string> checked_modes(const EngineBenchOptions& o) {
  if (o.prompt_tokens <= 0 || o.decode_tokens <= 1 || o.repeats <= 0) {
    throw Error(ErrorCode::kInvalidArgument, "--prompt-tokens, --decode-tokens (> 1) and --repeats must be positive");
  }
  std::vector<std::string> modes = split(o.modes);
  for (const std::string& mode : modes) {
    if (mode != "ar" && mode != "dflash" && mode != "auto") {
      throw Error(ErrorCode::kInvalidArgument, "--mode " + mode + ": ar, dflash or auto");
    }
    if (mode != "ar" && o.drafter_dir.empty())
      throw Error(ErrorCode::kInvalidArgument, "--mode " + mode + " needs --drafter");
  }
  return modes;
}

// A mode's reported run: the one of median speed, with tau over every run (each repeat decodes
// other prompts, so the tau of the run of median speed would change with the machine's load: it
// did, 1.37 to 1.92 on one prompt set), and the weight bandwidth it implies.
nlohmann::json summarise_runs(std::vector<nlohmann::json> mode_runs, size_t weight_bytes, int64_t concurrency) {
  double committed = 0, passes = 0;
  for (const nlohmann::json& r : mode_runs) {
    committed += r["tau"].get<double>() * r["target_passes"].get<double>();
    passes += r["target_passes"].get<double>();
  }
  std::sort(mode_runs.begin(), mode_runs.end(), [](const auto& a, const auto& b) {
    return a["decode_tokens_per_s"].template get<double>() < b["decode_tokens_per_s"].template get<double>();
  });
  nlohmann::json run = mode_runs[mode_runs.size() / 2];
  run["tau"] = passes > 0 ? committed / passes : 0.0;
  run["decode_weight_gb_per_s"] = run["decode_tokens_per_s"].get<double>() * static_cast<double>(weight_bytes) / 1e9 /
                                  static_cast<double>(concurrency);
  return run;
}

// With --passes: each pass's cost against a decode pass.
nlohmann::json pass_ratios(Bench& bench) {
  const double decode = bench.time_target_pass(1);
  nlohmann::json passes = {{"decode_s", decode}};
  if (bench.serving.drafter) passes["decode_with_taps_over_decode"] = bench.time_target_pass(1, true) / decode;
  for (int64_t b : {2, 4, 8, 16}) {
    passes["verify_" + std::to_string(b) + "_over_decode"] = bench.time_target_pass(b) / decode;
    if (bench.serving.drafter && b <= bench.serving.drafter->config().block_size) {
      const Bench::DraftTimes draft = bench.time_draft_pass(b);
      passes["draft_" + std::to_string(b) + "_over_decode"] = draft.pass / decode;
      if (bench.serving.drafter->selector() != nullptr) {
        passes["draft_" + std::to_string(b) + "_selector_share"] = draft.selector / draft.pass;
      }
    }
  }
  return passes;
}

void run_engine_bench(const EngineBenchOptions& o) {
  const std::vector<std::string> modes = checked_modes(o);
  set_programmatic_launches(o.pdl);
  Bench bench{o, ServingModel::load(o.model_dir, o.drafter_dir, o.device)};
  bench.serving.set_capture_passes(o.graphs);
  bench.serving.set_kv_cache_dtype(parse_kv_cache_dtype(o.kv_cache_dtype));
  bench.ordinary =
      std::min<int64_t>(bench.serving.tokenizer->vocab_size(), bench.serving.model->config().vocab_size) - 8;
  if (!o.prompts_file.empty()) bench.prompts = read_prompts(o.prompts_file, *bench.serving.tokenizer);
  const size_t bytes = weight_bytes(o.model_dir, bench.serving.model->config());

  nlohmann::json report = {{"backend", bench.serving.backend->name()},
                           {"graphs", o.graphs},
                           {"kv_cache_dtype", o.kv_cache_dtype},
                           {"pdl", o.pdl},
                           {"prompts", o.prompts_file.empty() ? "random" : o.prompts_file},
                           {"prompt_tokens", o.prompt_tokens},
                           {"decode_tokens", o.decode_tokens},
                           {"weight_bytes_per_token", bytes},
                           // A hybrid target's recurrent state, read and written by every decode step.
                           {"state_bytes_per_token", 2 * recurrent_state_bytes(*bench.serving.model)},
                           {"runs", nlohmann::json::array()}};
  for (const std::string& c : split(o.concurrency)) {
    const int64_t concurrency = std::stoll(c);
    // Modes take turns within each repeat, so a slow minute on this shared machine hits all of
    // them alike; each engine first runs once untimed (pages in weights, measures its passes).
    std::map<std::string, std::unique_ptr<Engine>> engines;
    std::map<std::string, std::vector<nlohmann::json>> runs;
    for (const std::string& mode : modes) {
      engines[mode] = bench.make_engine(mode, concurrency);
      bench.run(*engines[mode], mode, concurrency, 0);
    }
    for (int r = 0; r < o.repeats; ++r) {
      for (const std::string& mode : modes) runs[mode].push_back(bench.run(*engines[mode], mode, concurrency, r + 1));
    }
    // Speedup: the median of the ratios of runs taken side by side.
    auto speedup_over_ar = [&](const std::string& mode) {
      std::vector<double> ratios;
      for (int r = 0; r < o.repeats; ++r) {
        ratios.push_back(runs[mode][r]["decode_tokens_per_s"].get<double>() /
                         runs["ar"][r]["decode_tokens_per_s"].get<double>());
      }
      return median(ratios);
    };
    const bool has_ar = runs.count("ar") > 0;
    for (const std::string& mode : modes) {
      nlohmann::json run = summarise_runs(runs[mode], bytes, concurrency);
      if (has_ar && mode != "ar") {
        run["speedup"] = speedup_over_ar(mode);
        run["efficiency"] = run["speedup"].get<double>() / run["tau"].get<double>();
      }
      report["runs"].push_back(std::move(run));
    }
  }
  if (o.passes) report["passes"] = pass_ratios(bench);
  // With --graphs: how many passes were replayed rather than run op by op.
  report["replayed_target_passes"] = bench.serving.model->replayed_passes();
  if (bench.serving.drafter) report["replayed_draft_passes"] = bench.serving.drafter->replayed_passes();
  // Compatibility with the first version of this benchmark: the first run's figures at top level.
  report["prefill_tokens_per_s"] = report["runs"][0]["prefill_tokens_per_s"];
  report["decode_tokens_per_s"] = report["runs"][0]["decode_tokens_per_s"];
  std::cout << (o.json ? report.dump() : report.dump(2)) << std::endl;
}

}  // namespace

std::function<void()> add_engine_bench(CLI::App& app) {
  auto o = std::make_shared<EngineBenchOptions>();
  CLI::App* cmd = app.add_subcommand("engine", "prefill and decode speed of the engine");
  cmd->add_option("--model", o->model_dir, "target model directory")->required();
  cmd->add_option("--drafter", o->drafter_dir, "DFlash drafter directory");
  cmd->add_option("--mode", o->modes, "ar, dflash, auto, or several side by side: ar,dflash,auto")
      ->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "sequences at once, e.g. 1,4,16")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "bf16|float32: the KV caches' element type")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "float32"}));
  cmd->add_option("--prompt-tokens", o->prompt_tokens)->capture_default_str();
  cmd->add_option("--decode-tokens", o->decode_tokens, "tokens generated per sequence")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "draft block size (0: the drafter's)")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "runs per case; the median is reported")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the random prompts")->capture_default_str();
  cmd->add_option("--prompts", o->prompts_file,
                  "JSONL file of prompts (a JSON string or {\"prompt\": ...} per line) instead of random ones");
  cmd->add_flag("--passes", o->passes, "also time one decode, verify(B) and draft(B) pass");
  cmd->add_flag("--graphs", o->graphs,
                "record the target's and the drafter's passes and replay them while they repeat"
                " (CUDA graphs on a GPU)");
  cmd->add_flag("--pdl", o->pdl,
                "let each CUDA kernel start while the one before it finishes (programmatic dependent launch)");
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_engine_bench(*o);
  };
}

}  // namespace flashq
