#include "apps/flashq/submit_command.h"

#include <cstdio>
#include <memory>
#include <optional>

#include "apps/flashq/broker_options.h"
#include "apps/flashq/job_report.h"
#include "apps/flashq/live_text.h"
#include "client/flashq_client.h"
#include "shared/error.h"
#include "shared/protocol/limits.h"

namespace flashq {
namespace {

struct SubmitOptions {
  protocol::Job job;
  std::optional<std::string> prompt;
  std::vector<std::int32_t> prompt_tokens;
  std::optional<std::string> model;
  std::optional<std::string> session;
  std::string spec = "auto";
  bool chat = false;
  bool stream = false;
  bool live = false;
  bool json = false;
  int wait_timeout_ms = 0;
  BrokerOptions broker;
};

protocol::SpecMode parse_spec(const std::string& name) {
  for (protocol::SpecMode mode : {protocol::SpecMode::kAuto, protocol::SpecMode::kOff, protocol::SpecMode::kDflash}) {
    if (name == protocol::spec_mode_name(mode)) return mode;
  }
  throw Error(ErrorCode::kInvalidArgument, "--spec " + name + ": must be auto, off or dflash");
}

protocol::Job job_from_flags(const SubmitOptions& options) {
  protocol::Job job = options.job;
  if (options.prompt && !options.prompt_tokens.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "give --prompt or --prompt-tokens, not both");
  }
  if (options.chat && !options.prompt) throw Error(ErrorCode::kInvalidArgument, "--chat needs --prompt");
  if (options.prompt) {
    if (options.chat) {
      job.prompt = std::vector<protocol::ChatMessage>{{"user", *options.prompt}};
    } else {
      job.prompt = *options.prompt;
    }
  } else if (!options.prompt_tokens.empty()) {
    job.prompt = options.prompt_tokens;
  } else {
    throw Error(ErrorCode::kInvalidArgument, "one of --prompt, --prompt-tokens is required");
  }
  job.model = options.model;
  if (options.session && (options.session->empty() || options.session->size() > protocol::kMaxSessionBytes)) {
    throw Error(ErrorCode::kInvalidArgument, "--session must be 1.." + std::to_string(protocol::kMaxSessionBytes) +
                                                 " bytes, got " + std::to_string(options.session->size()));
  }
  job.session = options.session;
  job.spec = parse_spec(options.spec);
  // The text only travels in the job's events, so the CLI always asks for them; --stream decides
  // whether they are shown as they come.
  job.stream = true;
  return job;
}

int run_submit(const SubmitOptions& options) {
  const protocol::Job job = job_from_flags(options);
  Client client;
  connect_to_broker(client, options.broker);
  if (options.live && options.json) throw Error(ErrorCode::kInvalidArgument, "--live shows text, not --json");
  const std::string id = client.submit(job, options.broker.timeout_ms);

  std::optional<LiveText> live;
  if (options.live) live.emplace(stdout);
  std::string text;
  protocol::TokenIds tokens;
  const protocol::FinalResult result = client.wait(
      id,
      [&](const protocol::Event& event) {
        text += event.text;
        tokens.insert(tokens.end(), event.token_ids.begin(), event.token_ids.end());
        if (live) return live->add(event);
        if (!options.stream) return;
        if (options.json) {
          print_json_line(event_json(event));
        } else {
          std::fwrite(event.text.data(), 1, event.text.size(), stdout);
          std::fflush(stdout);
        }
      },
      options.wait_timeout_ms);

  if (options.json) {
    nlohmann::json out = {{"id", id}, {"text", text}, {"tokens", tokens}};
    out.update(final_result_json(result));
    print_json_line(out);
  } else if (live) {
    live->finish(result);
  } else {
    if (!options.stream) std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
    std::fflush(stdout);
  }
  return report_finish(id, result);
}

}  // namespace

std::function<int()> add_submit_command(CLI::App& app) {
  auto options = std::make_shared<SubmitOptions>();
  protocol::Job& job = options->job;
  CLI::App* cmd = app.add_subcommand("submit", "submit a generation job to the broker and print its text");
  cmd->add_option("--id", job.id, "job id (idempotency key; the broker assigns one if absent)");
  cmd->add_option("--prompt", options->prompt, "prompt text");
  cmd->add_option("--prompt-tokens", options->prompt_tokens, "prompt as token ids, comma separated")->delimiter(',');
  cmd->add_flag("--chat", options->chat, "send the prompt as one user message (the worker applies its chat template)");
  cmd->add_option("--max-tokens", job.max_tokens, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--temperature", job.temperature, "0 is greedy")->capture_default_str();
  cmd->add_option("--top-p", job.top_p)->capture_default_str();
  cmd->add_option("--top-k", job.top_k, "0: no limit")->capture_default_str();
  cmd->add_option("--seed", job.seed)->capture_default_str();
  cmd->add_option("--stop", job.stop, "stop string (repeatable)");
  cmd->add_option("--stop-token-id", job.stop_token_ids, "stop token id (repeatable)");
  cmd->add_option("--priority", job.priority, "lower runs first")->capture_default_str();
  cmd->add_option("--deadline-ms", job.deadline_ms, "time allowed from submission (0: broker default)")
      ->capture_default_str();
  cmd->add_option("--spec", options->spec, "speculative decoding: auto, off or dflash")->capture_default_str();
  cmd->add_option("--block-size", job.block_size, "DFlash block size (0: the worker's choice)")->capture_default_str();
  cmd->add_option("--model", options->model, "only workers serving this model run the job (absent: any worker)");
  cmd->add_option("--session", options->session,
                  "the conversation this job continues: the broker prefers the worker that served it last");
  cmd->add_flag("--stream", options->stream, "print the text as it is generated (with --json: one line per event)");
  cmd->add_flag("--live", options->live,
                "print the text as it is generated with live tokens/s and tau, then a summary line (stderr)");
  cmd->add_flag("--json", options->json, "print the result as one JSON object: id, text, tokens, finish_reason, ...");
  cmd->add_option("--wait-timeout-ms", options->wait_timeout_ms, "give up waiting for the job after this (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_broker_options(*cmd, options->broker);
  return [cmd, options] { return *cmd ? run_submit(*options) : 0; };
}

}  // namespace flashq
