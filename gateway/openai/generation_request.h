// A /v1/chat/completions or /v1/completions request read into flashq jobs, one per choice, with
// what rendering their events back needs (docs/gateway.md, "Chat completions and completions").
//
// The reading is strict, as OpenAI's own is: every field is implemented, accepted as a documented
// extension or as an identifier that changes nothing (`user`), or refused with a 400 naming it;
// an unknown field is a 400 (unrecognized_request_argument). Every failure is an ApiError.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gateway/openai/served_model.h"
#include "gateway/output/output_parser_factory.h"
#include "gateway/output/tool_choice.h"
#include "shared/protocol/job.h"

namespace flashq::gateway {

enum class Endpoint { kChatCompletions, kCompletions };

// What the server knows besides the body: the flashq headers (x-flashq-priority,
// x-flashq-deadline-ms) and its own defaults. A header and a body extension of the same name that
// disagree are a 400 (the request says two things); equal, they are one.
struct RequestExtensions {
  std::optional<std::int64_t> priority;     // lower runs first
  std::optional<std::int64_t> deadline_ms;  // from submission; 0: the broker's default
  std::optional<std::string> session;       // x-flashq-session: the job's session, before the body's `user`
  // max_tokens when the body gives none (and max_completion_tokens neither); 0: the job map's
  // default (256). Cut to what fits a model with a known context (exactly for a token-id prompt;
  // for text, to the context less one token).
  std::int64_t default_max_tokens = 0;
  // The sampling seed when the body gives none (the server draws one per request, so requests
  // without a seed differ as OpenAI's do). Choice i runs with seed + i.
  std::uint64_t default_seed = 0;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;  // as named by the request, echoed in every response
  // One job per choice, in choice order (completions: prompt-major, n per prompt); each with
  // stream = true and an empty id (the broker assigns one).
  std::vector<protocol::Job> jobs;
  // Completions with several prompts: the prompt each choice answers (usage counts each prompt
  // once). Chat: all 0.
  std::vector<std::size_t> prompt_of_choice;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage

  // Chat only: how the model's output is read back.
  OutputFormat output_format;
  bool has_tools = false;  // tools given (and tool_choice not "none")
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;   // false: only the first tool call is kept
  bool parse_reasoning = true;       // split <think> reasoning from the content
  bool starts_in_reasoning = false;  // the template opens <think> in the prompt
};

// The body parsed as nlohmann::ordered_json: tool definitions reach the chat template key by key
// as the client wrote them (a template renders them with `tojson`, and a model reads a schema's
// properties in that order), as the job map carries them (docs/protocol.md, "JSON-like values").
GenerationRequest read_chat_completion_request(const nlohmann::ordered_json& body, const ModelDirectory& models,
                                               const RequestExtensions& ext);
GenerationRequest read_completion_request(const nlohmann::ordered_json& body, const ModelDirectory& models,
                                          const RequestExtensions& ext);

}  // namespace flashq::gateway
