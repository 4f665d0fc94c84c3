// The request fields /v1/chat/completions and /v1/completions share (model, n, stream, sampling,
// stop, max_tokens, the flashq extensions) and the steps both take to turn them into jobs: one job
// per choice, max_tokens defaulted and checked against the context, and the jobs checked against
// the job map's limits before they are submitted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gateway/openai/generation_request.h"
#include "gateway/openai/request_body.h"
#include "gateway/openai/served_model.h"
#include "shared/protocol/job.h"

namespace flashq::gateway {

// The fields both endpoints read (read_requested_model, read_shared_fields); each endpoint's table
// holds the rest of its fields.
inline constexpr std::string_view kSharedGenerationFields[] = {
    "model", "n", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "seed",
    "stop", "stop_token_ids", "user", "frequency_penalty", "presence_penalty", "logit_bias", "priority",
    "deadline_ms", "spec",
    // vLLM's structured-output extensions (structured_output_request.h).
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"};

// OpenAI's bound on n; also on all the choices of a request with several prompts.
inline constexpr std::size_t kMaxChoices = 128;

struct SharedFields {
  protocol::Job job;  // every field but the prompt, max_tokens and the seed
  std::int64_t n = 1;
  bool stream = false;
  bool include_usage = false;
  std::uint64_t seed = 0;
  std::optional<std::int64_t> max_tokens;  // as the request gave it
  std::string max_tokens_field;            // the field that gave it, for errors
};

// `model`: 404 model_not_found when the directory does not hold it.
const ServedModel& read_requested_model(RequestBody& body, const ModelDirectory& models);

// The job's session (docs/gateway.md, "Sessions"): the x-flashq-session header, else the body's
// `user`, so that a conversation's requests go to the worker whose caches hold its earlier turns.
// Empty is none; over the job map's 256 bytes is a 400 naming where it came from.
std::optional<std::string> read_session(const std::optional<std::string>& header, const std::optional<std::string>& user);

// Reads and refuses the shared fields; leaves `max_completion_tokens` and the endpoint's own fields
// to the caller.
SharedFields read_shared_fields(RequestBody& body, const RequestExtensions& ext);

// max_tokens for a job: the request's, else the gateway's default, else the job map's. When the
// model's context is known, a request that cannot fit is a 400 context_length_exceeded and the
// default is cut to what fits: judged exactly for a token-id prompt (`prompt_tokens`), and for
// text (nullopt) only as far as a prompt of at least one token allows; the worker judges the rest.
std::int64_t max_tokens_for(const SharedFields& fields, const ServedModel& model, const RequestExtensions& ext,
                            std::optional<std::size_t> prompt_tokens, const std::string& prompt_field);

// The n jobs of one prompt: `job` with choice i's seed (seed + i).
void add_choice_jobs(const SharedFields& fields, const protocol::Job& job, std::vector<protocol::Job>& jobs);

// Encodes and decodes each job as SUBMIT carries it, so a job the broker would refuse for the job
// map's limits (docs/protocol.md, "The job map") is a 400 here, naming the field.
void check_job_limits(const std::vector<protocol::Job>& jobs);

}  // namespace flashq::gateway
