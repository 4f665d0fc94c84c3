// POST /v1/responses read into one flashq job, and the same request recovered from that job
// alone (docs/gateway.md, "The Responses API").
//
// A response is one job whose id is the response id. Everything the response's stream and its
// response object need besides the job's events is kept with the job, in its opaque `metadata`
// field (shared/protocol/job.h), as one msgpack map:
//   {"flashq_responses": 1,               format version
//    "echo": {...},                       the request's fields the response object repeats:
//                                         model, instructions, tools (as sent), tool_choice,
//                                         parallel_tool_calls, max_output_tokens, temperature,
//                                         top_p, metadata (OpenAI's string map), reasoning, text,
//                                         truncation, store, background, user, safety_identifier
//    "stream": bool,                      the request asked for a stream
//    "tool_calls": "hermes" | "llama3_json" | "none",   the served model's output format,
//    "reasoning": "think" | "think_in_prompt" | "none",   as read when the request came in
//    "starts_in_reasoning": bool,
//    "created_at": Unix seconds}           when the endpoint accepted the request
// so a gateway that restarted, or one that no longer serves the model, renders the same events
// from the same job: ResponsesRenderer is a function of ResponseSettings, the response id (the
// job id), created_at and the job's events, and all of them come back from the job byte for byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gateway/openai/request_body.h"
#include "gateway/openai/served_model.h"
#include "gateway/output/output_parser_factory.h"
#include "gateway/output/tool_choice.h"
#include "shared/protocol/job.h"

namespace flashq::gateway {

// The JSON of a response's request and its echo, keys in the client's order.
using ResponsesJson = BodyJson;

// What the renderer needs, all of it recoverable from the job.
struct ResponseSettings {
  std::string model;
  ResponsesJson echo;  // see the header comment; an ordered object
  ToolChoice tool_choice;
  OutputFormat output_format;
  bool starts_in_reasoning = false;
  bool parse_tool_calls = false;  // the request has tools and tool_choice is not none

  bool operator==(const ResponseSettings&) const = default;
};

struct ResponsesRequest {
  std::string model;
  protocol::Job job;  // stream = true, id empty (the server sets it to the response id)
  bool stream = false;
  bool background = false;
  bool store = true;
  std::int64_t created_at = 0;  // Unix seconds, from ResponsesJobOptions
  ResponseSettings settings;

  bool operator==(const ResponsesRequest&) const = default;
};

// What the endpoint adds to the body: job placement from its headers (priority, lower runs
// first; deadline in ms from submission, 0: the broker's default) and the time it accepted the
// request (the response's created_at, Unix seconds), kept with the job.
struct ResponsesJobOptions {
  std::int64_t priority = 0;
  std::int64_t deadline_ms = 0;
  std::int64_t created_at = 0;
  std::optional<std::string> session;  // x-flashq-session, before the body's `user`
};

// The output budget when max_output_tokens is absent: this many tokens, or half the model's
// context when that is smaller (the prompt needs the rest).
inline constexpr std::int64_t kDefaultMaxOutputTokens = 4096;

// Throws ApiError: 400 for a malformed body, an unknown field or an unsupported one (named),
// 404 model_not_found for a model not in `models`. Body fields are those of OpenAI's
// ResponseCreateParams plus the extension `chat_template_kwargs` (an object handed to the chat
// template, as on /v1/chat/completions).
ResponsesRequest read_responses_request(const ResponsesJson& body, const ModelDirectory& models,
                                        const ResponsesJobOptions& options = {});

// The request back from a job made by read_responses_request (after the server set its id):
// `job` as given (one known only by its id and metadata, as STATUS_REPLY gives them, takes its
// model from the metadata), the rest from its metadata. Throws ApiError 404 (code response_not_found)
// when the job was not made by /v1/responses (no metadata, or another producer's).
ResponsesRequest recover_responses_request(const protocol::Job& job);

}  // namespace flashq::gateway
