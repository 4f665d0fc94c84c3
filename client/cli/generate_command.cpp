#include "client/cli/generate_command.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "kernels/backend_factory.h"
#include "worker/engine/generate.h"
#include "worker/tokenizer/chat_template.h"

namespace flashq {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string prompt;
  std::string device = "auto";
  bool chat = false;
  bool json = false;
  GenerationRequest request;
};

void run_generate(GenerateOptions& options) {
  std::unique_ptr<Backend> backend = make_backend(options.device);
  std::unique_ptr<Qwen3Model> model = Qwen3Model::load(options.model_dir, *backend);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.model_dir);

  std::string text = options.chat ? format_chatml({{"user", options.prompt}}) : options.prompt;
  options.request.prompt_tokens = tokenizer->encode(text);

  StreamCallback print_text;
  if (!options.json) {
    print_text = [](std::span<const int32_t>, std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  }
  GenerationResult result = generate(*model, *tokenizer, options.request, print_text);
  if (!options.json) {
    std::printf("\n");
    return;
  }
  nlohmann::json out = {
      {"text", result.text},
      {"tokens", result.tokens},
      {"finish_reason", finish_reason_name(result.finish_reason)},
      {"stats",
       {{"prompt_tokens", result.stats.prompt_tokens},
        {"completion_tokens", result.stats.completion_tokens},
        {"prefill_tokens_per_s", result.stats.prefill_tokens_per_s()},
        {"decode_tokens_per_s", result.stats.decode_tokens_per_s()}}},
  };
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

}  // namespace

std::function<void()> add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "run one prompt through a model in this process");
  cmd->add_option("--model", options->model_dir, "model directory")->required();
  cmd->add_option("--prompt", options->prompt, "prompt text")->required();
  cmd->add_option("--max-tokens", options->request.max_tokens, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--temperature", options->request.sampling.temperature, "0 is greedy")->capture_default_str();
  cmd->add_option("--top-p", options->request.sampling.top_p)->capture_default_str();
  cmd->add_option("--top-k", options->request.sampling.top_k, "0: no limit")->capture_default_str();
  cmd->add_option("--seed", options->request.sampling.seed)->capture_default_str();
  cmd->add_option("--stop", options->request.stop, "stop string (repeatable)");
  cmd->add_flag("--ignore-eos", options->request.ignore_eos, "generate max-tokens tokens");
  cmd->add_flag("--chat", options->chat, "wrap the prompt as a user turn (ChatML)");
  cmd->add_flag("--json", options->json, "print one JSON object with text, tokens and stats");
  cmd->add_option("--device", options->device, "cpu, cuda or auto")->capture_default_str();
  return [cmd, options] {
    if (*cmd) run_generate(*options);
  };
}

}  // namespace flashq
