#include "tools/flashq_bench/engine_bench.h"

#include <algorithm>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "worker/engine/generate.h"
#include "worker/model/safetensors.h"

namespace flashq {
namespace {

struct EngineBenchOptions {
  std::string model_dir;
  std::string mode = "ar";
  std::string device = "auto";
  int64_t prompt_tokens = 259;
  int64_t decode_tokens = 64;
  int repeats = 3;
  uint64_t seed = 1;
  bool json = false;
};

// Bytes of weights one decode step reads: every matrix once (a tied LM head is the embedding).
size_t weight_bytes_per_token(const std::string& dir) {
  WeightStore weights = WeightStore::open(dir);
  size_t bytes = 0;
  for (const std::string& name : weights.names()) bytes += weights.get(name).nbytes();
  return bytes;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void run_engine_bench(const EngineBenchOptions& o) {
  if (o.mode != "ar") throw Error(ErrorCode::kInvalidArgument, "--mode " + o.mode + ": only 'ar' exists so far");
  if (o.prompt_tokens <= 0 || o.decode_tokens <= 1 || o.repeats <= 0) {
    throw Error(ErrorCode::kInvalidArgument, "--prompt-tokens, --decode-tokens (> 1) and --repeats must be positive");
  }
  std::unique_ptr<Backend> backend = make_backend(o.device);
  std::unique_ptr<Qwen3Model> model = Qwen3Model::load(o.model_dir, *backend);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(o.model_dir);

  // A fixed pseudo-random prompt of ordinary tokens (no special ids).
  GenerationRequest request;
  const int64_t ordinary = std::min<int64_t>(tokenizer->vocab_size(), model->config().vocab_size) - 8;
  uint64_t state = o.seed;
  for (int64_t i = 0; i < o.prompt_tokens; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    request.prompt_tokens.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(ordinary)));
  }
  request.max_tokens = o.decode_tokens;
  request.ignore_eos = true;

  GenerationRequest warmup = request;
  warmup.max_tokens = 2;
  generate(*model, *tokenizer, warmup);

  std::vector<double> prefill, decode;
  for (int r = 0; r < o.repeats; ++r) {
    GenerationResult result = generate(*model, *tokenizer, request);
    prefill.push_back(result.stats.prefill_tokens_per_s());
    decode.push_back(result.stats.decode_tokens_per_s());
  }
  const size_t bytes = weight_bytes_per_token(o.model_dir);
  const double decode_rate = median(decode);
  nlohmann::json out = {
      {"mode", o.mode},
      {"backend", backend->name()},
      {"prompt_tokens", o.prompt_tokens},
      {"decode_tokens", o.decode_tokens},
      {"repeats", o.repeats},
      {"prefill_tokens_per_s", median(prefill)},
      {"decode_tokens_per_s", decode_rate},
      {"weight_bytes_per_token", bytes},
      {"decode_weight_gb_per_s", decode_rate * static_cast<double>(bytes) / 1e9},
  };
  if (o.json) {
    std::cout << out.dump() << std::endl;
  } else {
    std::cout << out.dump(2) << std::endl;
  }
}

}  // namespace

std::function<void()> add_engine_bench(CLI::App& app) {
  auto o = std::make_shared<EngineBenchOptions>();
  CLI::App* cmd = app.add_subcommand("engine", "prefill and decode speed of the engine");
  cmd->add_option("--model", o->model_dir, "model directory")->required();
  cmd->add_option("--mode", o->mode, "ar (plain autoregressive decoding)")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--prompt-tokens", o->prompt_tokens)->capture_default_str();
  cmd->add_option("--decode-tokens", o->decode_tokens)->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "runs; the median is reported")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the random prompt")->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON line");
  return [cmd, o] {
    if (*cmd) run_engine_bench(*o);
  };
}

}  // namespace flashq
