#include "tools/flashq_bench/constrained_bench.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/engine/engine.h"
#include "worker/grammar/grammar_compiler.h"
#include "worker/grammar/grammar_constraint.h"
#include "worker/serving/serving_model.h"

namespace flashq {
namespace {

struct ConstrainedBenchOptions {
  std::string model_dir = "models/demo/target";
  std::string drafter_dir = "models/demo/drafter";
  int64_t concurrency = 4;
  int64_t prompts = 8;
  int64_t max_tokens = 96;
  int64_t block_size = 4;
  int repeats = 3;
  bool json = false;
};

// A record a program might ask for: nested, bounded, with an enum, an array and a number.
const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string","minLength":1,"maxLength":24},
  "language":{"enum":["python","c++","rust","go"]},
  "lines":{"type":"integer","minimum":0,"maximum":9999},
  "tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":3},
  "owner":{"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":999},
     "team":{"type":"string","maxLength":16}},"required":["id","team"],"additionalProperties":false},
  "tested":{"type":"boolean"}},
  "required":["name","language","lines","tags","owner","tested"],"additionalProperties":false})";

struct Case {
  const char* name;
  SpecMode spec;
  bool constrained;
  bool mask_drafts;
  bool jump_forward;
};

const Case kCases[] = {
    {"target only", SpecMode::kOff, false, true, true},
    {"target only, schema", SpecMode::kOff, true, true, true},
    {"target only, schema, no jump-forward", SpecMode::kOff, true, true, false},
    {"dflash", SpecMode::kDflash, false, true, true},
    {"dflash, schema, drafts masked", SpecMode::kDflash, true, true, true},
    {"dflash, schema, target rows only", SpecMode::kDflash, true, false, true},
};

struct Run {
  double decode_tokens_per_s = 0;
  double tau = 0;
  int64_t tokens = 0;
};

Run run_case(ServingModel& serving, const std::shared_ptr<const grammar::CompiledGrammar>& grammar,
             const ConstrainedBenchOptions& o, const Case& c) {
  Engine engine(*serving.model, serving.proposer.get(),
                {.max_slots = o.concurrency, .mask_drafts = c.mask_drafts, .jump_forward = c.jump_forward});
  for (int64_t i = 0; i < o.prompts; ++i) {
    SequenceRequest r{.spec = c.spec, .block_size = c.spec == SpecMode::kOff ? 0 : o.block_size};
    r.generation.prompt_tokens = serving.tokenizer->encode_with_special_tokens(
        "# A record of project " + std::to_string(i) + " as JSON, with its name, language and owner:\n");
    r.generation.max_tokens = o.max_tokens;
    if (c.constrained) r.constraint = std::make_shared<grammar::GrammarConstraint>(grammar);
    engine.add(static_cast<uint64_t>(i), std::move(r));
  }
  engine.run_until_idle();
  const PhaseSeconds& phases = engine.phase_seconds();
  Run run;
  int64_t committed = 0, passes = 0;
  for (const FinishedSequence& done : engine.take_finished()) {
    run.tokens += static_cast<int64_t>(done.tokens.size());
    committed += done.spec_stats.committed_tokens;
    passes += done.spec_stats.target_passes;
  }
  const double decode_seconds = phases.draft + phases.verify + phases.other;
  // The first token of each sequence comes out of its prefill.
  run.decode_tokens_per_s = decode_seconds > 0 ? static_cast<double>(run.tokens - o.prompts) / decode_seconds : 0;
  run.tau = passes > 0 ? static_cast<double>(committed) / static_cast<double>(passes) : 0;
  return run;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

void run_constrained_bench(const ConstrainedBenchOptions& o) {
  ServingModel serving = ServingModel::load(o.model_dir, o.drafter_dir, "cpu");
  const ModelConfig& config = serving.model->config();
  auto table = std::make_shared<const grammar::TokenTable>(*serving.tokenizer, config.eos_token_ids,
                                                           static_cast<int32_t>(config.vocab_size));
  const auto grammar =
      grammar::compile_grammar({.format = grammar::GrammarFormat::kJsonSchema, .text = kSchema}, table);
  std::map<std::string, std::vector<Run>> runs;
  for (int r = 0; r < o.repeats; ++r) {  // side by side: every case once per round
    for (const Case& c : kCases) runs[c.name].push_back(run_case(serving, grammar, o, c));
  }
  nlohmann::json report = {{"bench", "constrained"}, {"model", o.model_dir},     {"concurrency", o.concurrency},
                           {"prompts", o.prompts},   {"max_tokens", o.max_tokens}, {"cases", nlohmann::json::array()}};
  for (const Case& c : kCases) {
    std::vector<double> rates, taus, tokens;
    for (const Run& run : runs[c.name]) {
      rates.push_back(run.decode_tokens_per_s);
      taus.push_back(run.tau);
      tokens.push_back(static_cast<double>(run.tokens));
    }
    report["cases"].push_back({{"case", c.name},
                               {"decode_tokens_per_s", median(rates)},
                               {"tau", median(taus)},
                               {"output_tokens", median(tokens)}});
  }
  std::cout << (o.json ? report.dump() : report.dump(2)) << std::endl;
}

}  // namespace

std::function<void()> add_constrained_bench(CLI::App& app) {
  auto o = std::make_shared<ConstrainedBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "constrained", "decode rate and tau with a JSON Schema constraint against without, target only and DFlash");
  cmd->add_option("--model", o->model_dir, "target model directory")->capture_default_str();
  cmd->add_option("--drafter", o->drafter_dir, "DFlash drafter directory")->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "sequences decoding at once")->capture_default_str();
  cmd->add_option("--prompts", o->prompts, "sequences per case")->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per sequence at most")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "DFlash block size")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "rounds of every case, side by side; medians reported")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_constrained_bench(*o);
  };
}

}  // namespace flashq
