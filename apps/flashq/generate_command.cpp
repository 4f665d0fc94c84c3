#include "apps/flashq/generate_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>

#include "shared/error.h"
#include "shared/json_file.h"
#include "worker/model/kv_cache_dtype.h"
#include "worker/serving/generate.h"
#include "worker/serving/serving_model.h"

namespace flashq {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string drafter_dir;
  std::string prompt;
  std::string device = "auto";
  std::string spec = "auto";
  std::string kv_cache_dtype = "bf16";
  std::string trace_path;
  bool chat = false;
  std::string system;                         // --chat: a system message before the prompt
  std::string tools_path;                     // --chat: a JSON file with an array of tool definitions
  std::vector<std::string> template_options;  // --chat: key=value, the value JSON or plain text
  bool json = false;
  SequenceRequest request;
};

// The chat the template renders: an optional system message, the prompt as the user's turn, the
// tools of --tools and the variables of --template-option.
ChatRequest chat_request(const GenerateOptions& options) {
  std::vector<ChatMessage> messages;
  if (!options.system.empty()) messages.push_back({"system", options.system});
  messages.push_back({"user", options.prompt});
  ChatRequest request{.messages = plain_chat_messages(messages)};
  if (!options.tools_path.empty()) {
    request.tools = ChatJson::parse(read_text_file(options.tools_path), nullptr, /*allow_exceptions=*/false);
    if (!request.tools.is_array()) {
      throw Error(ErrorCode::kInvalidArgument, "--tools " + options.tools_path + ": must hold a JSON array of tools");
    }
  }
  for (const std::string& option : options.template_options) {
    const size_t equals = option.find('=');
    if (equals == 0 || equals == std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument, "--template-option " + option + ": must be key=value");
    }
    const std::string text = option.substr(equals + 1);
    // true, false, numbers, quoted strings, arrays and objects as JSON; other text as itself.
    ChatJson value = ChatJson::parse(text, nullptr, /*allow_exceptions=*/false);
    if (request.options.is_null()) request.options = ChatJson::object();
    request.options[option.substr(0, equals)] = value.is_discarded() ? ChatJson(text) : value;
  }
  return request;
}

// Each output token's log-probability and its row's most likely tokens, as [id, logprob] pairs.
nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& logprobs) {
  nlohmann::json out = nlohmann::json::array();
  for (const TokenLogprobs& token : logprobs) {
    nlohmann::json top = nlohmann::json::array();
    for (const TokenLogprob& t : token.top) top.push_back({t.token, t.logprob});
    out.push_back({{"logprob", token.logprob}, {"top", std::move(top)}});
  }
  return out;
}

void run_generate(GenerateOptions& options) {
  if (!options.chat && (!options.system.empty() || !options.tools_path.empty() || !options.template_options.empty())) {
    throw Error(ErrorCode::kInvalidArgument, "--system, --tools and --template-option need --chat");
  }
  // Before the model loads: a bad --tools file should not cost a load first.
  std::optional<ChatRequest> chat;
  if (options.chat) chat = chat_request(options);
  ServingModel serving = ServingModel::load(options.model_dir, options.drafter_dir, options.device);
  serving.set_kv_cache_dtype(parse_kv_cache_dtype(options.kv_cache_dtype));
  Tokenizer& tokenizer = *serving.tokenizer;
  options.request.spec = parse_spec_mode(options.spec);
  // As the worker does (worker/process/job_request.cpp): the template writes its own special tokens.
  options.request.generation.prompt_tokens = chat ? tokenizer.encode(serving.chat_template.chat_template->render(*chat))
                                                  : tokenizer.encode_with_special_tokens(options.prompt);

  EngineOptions engine_options{.max_slots = 1};
  StreamCallback print;
  if (!options.json) {
    print = [](std::span<const int32_t>, std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  }
  std::ofstream trace;
  if (!options.trace_path.empty()) {
    trace.open(options.trace_path);
    if (!trace) throw Error(ErrorCode::kIo, options.trace_path + ": cannot open for writing");
    engine_options.on_trace = [&trace](const TraceRecord& r) {
      trace
          << nlohmann::json{{"start", r.start}, {"draft", r.draft}, {"accepted", r.accepted}, {"bonus", r.bonus}}.dump()
          << "\n";
    };
  }
  const SequenceOutput output = generate_sequence(*serving.model, serving.proposer.get(), tokenizer, options.request,
                                                  std::move(engine_options), print);
  if (!options.json) {
    std::printf("\n");
    return;
  }
  const FinishedSequence& done = output.engine_record;
  const double decode_seconds = done.total_s - done.time_to_first_token_s;
  const int64_t completion = static_cast<int64_t>(output.tokens.size());
  nlohmann::json out = {
      {"text", output.text},
      {"tokens", output.tokens},
      {"finish_reason", finish_reason_name(output.finish_reason)},
      {"stats",
       {{"prompt_tokens", done.prompt_tokens},
        {"completion_tokens", completion},
        {"prefill_tokens_per_s",
         done.time_to_first_token_s > 0 ? done.prompt_tokens / done.time_to_first_token_s : 0.0},
        {"decode_tokens_per_s", decode_seconds > 0 && completion > 1 ? (completion - 1) / decode_seconds : 0.0},
        {"draft_steps", done.spec_stats.draft_steps},
        {"accepted_tokens", done.spec_stats.accepted_tokens},
        {"tau", done.spec_stats.tau()}}},
  };
  if (options.request.generation.logprobs >= 0) out["logprobs"] = logprobs_json(output.logprobs);
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

}  // namespace

std::function<void()> add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  GenerationRequest& g = options->request.generation;
  CLI::App* cmd = app.add_subcommand("generate", "run one prompt through a model in this process");
  cmd->add_option("--model", options->model_dir, "model directory")->required();
  cmd->add_option("--prompt", options->prompt, "prompt text")->required();
  cmd->add_option("--drafter", options->drafter_dir, "DFlash drafter directory (speculative decoding)");
  cmd->add_option("--spec", options->spec, "off, dflash or auto")->capture_default_str();
  cmd->add_option("--block-size", options->request.block_size, "draft block size (0: the drafter's)")
      ->capture_default_str();
  cmd->add_option("--trace", options->trace_path, "write one JSON line per speculative step");
  cmd->add_option("--max-tokens", g.max_tokens, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--temperature", g.sampling.temperature, "0 is greedy")->capture_default_str();
  cmd->add_option("--top-p", g.sampling.top_p)->capture_default_str();
  cmd->add_option("--top-k", g.sampling.top_k, "0: no limit")->capture_default_str();
  cmd->add_option("--seed", g.sampling.seed)->capture_default_str();
  cmd->add_option("--stop", g.stop, "stop string (repeatable)");
  cmd->add_flag("--ignore-eos", g.ignore_eos, "generate max-tokens tokens");
  cmd->add_option("--logprobs", g.logprobs,
                  "with --json: each token's log-probability and this many of its row's most likely (0..20; -1: none)")
      ->capture_default_str();
  cmd->add_flag("--chat", options->chat,
                "wrap the prompt as a user turn with the checkpoint's chat template (or its family's default)");
  cmd->add_option("--system", options->system, "--chat: a system message before the prompt");
  cmd->add_option("--tools", options->tools_path,
                  "--chat: JSON file with an array of tool definitions (OpenAI's form)");
  cmd->add_option("--template-option", options->template_options,
                  "--chat: key=value, a variable of the chat template, e.g. enable_thinking=false (value as JSON, "
                  "else text; repeatable)");
  cmd->add_flag("--json", options->json, "print one JSON object with text, tokens and stats");
  cmd->add_option("--device", options->device, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype, "bf16|float32: the KV caches' element type (bf16: half the memory per position)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "float32"}));
  return [cmd, options] {
    if (*cmd) run_generate(*options);
  };
}

}  // namespace flashq
