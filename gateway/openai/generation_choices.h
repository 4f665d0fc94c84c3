// The choices of a chat completion or completion as their jobs' events arrive: what the chat and
// completion renderers share. Each choice feeds its job's text to its own output parser (docs/
// gateway.md, "Model output") and folds the deltas into its message; the final event ends it with
// the job's outcome. A job that ends without a completion (cancelled, deadline, error, rejected)
// fails the whole request with the ApiError job_outcome_error gives: an OpenAI response has no
// way to say that one choice of several failed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/openai/api_error.h"
#include "gateway/openai/generation_request.h"
#include "gateway/output/output_parser.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

// The error a job's final outcome answers with, or nullopt for a completion (stop, length):
//   cancelled  499 invalid_request_error "cancelled"    (no retry: someone stopped it on purpose)
//   deadline   504 server_error          "timeout"      (a retry with more time may succeed)
//   error      500 server_error          "server_error" (a failure of the system; may succeed again)
//   rejected   400 invalid_request_error "job_rejected" (the job cannot be served as asked: its
//              prompt does not fit the context, the template refuses the messages, ...), except
//              the broker's "no worker serves model ..." (its model lost every worker while the
//              job waited): 503 server_error "model_unavailable", Retry-After 5 s
// The message names the job and carries the final map's `error` text.
std::optional<ApiError> job_outcome_error(const protocol::FinalResult& result, const std::string& job_id);

// The length of the longest prefix of `text` that does not end inside a UTF-8 character.
std::size_t complete_utf8_prefix(std::string_view text);

// "call_<job id>_<index>": stable across a resumed stream, unique across jobs.
std::string tool_call_id(const std::string& job_id, int index);

// OpenAI's usage object: {prompt_tokens, completion_tokens, total_tokens}.
nlohmann::ordered_json usage_json(const protocol::Usage& usage);

class GenerationChoices {
 public:
  // One job id per choice, in choice order. Throws Error kInternal when the count differs from the
  // request's jobs.
  GenerationChoices(const GenerationRequest& request, std::vector<std::string> job_ids);

  // What one event did to its choice.
  struct Step {
    OutputDeltas deltas;              // settled by this event (the final one: and held text)
    bool first = false;               // the choice's first event
    bool finished = false;            // the event carried the choice's final result
    std::optional<ApiError> failure;  // the final result is not a completion
    // The event's tokens' log-probabilities, when the request asked for them (a view of the
    // choice's, valid until its next event), and the bytes of the choice's tokens before them
    // (completions' text_offset).
    std::span<const protocol::OutputLogprobs> logprobs;
    std::int64_t logprobs_text_offset = 0;
  };
  // Events come in seq order per choice; one whose seq was already taken (a replay overlapping
  // what arrived) settles nothing, nor does any event after the request failed or the choice
  // finished. A seq beyond the next one expected is taken as it is: asking for a replay of a gap
  // (next_seq) is the caller's part.
  Step on_event(std::size_t choice, const protocol::Event& event);

  std::size_t size() const { return choices_.size(); }
  const std::string& job_id(std::size_t choice) const { return job_ids_.at(choice); }
  std::int64_t next_seq(std::size_t choice) const { return choices_.at(choice).next_seq; }
  bool finished(std::size_t choice) const { return choices_.at(choice).final_result.has_value(); }
  bool all_finished() const;
  // The first failure; once set, the request is over.
  const std::optional<ApiError>& failure() const { return failure_; }

  const AssistantMessage& message(std::size_t choice) const { return choices_.at(choice).message; }
  // Whether the jobs carry log-probabilities (the request's logprobs), and a choice's so far.
  bool logprobs_asked() const { return logprobs_asked_; }
  const std::vector<protocol::OutputLogprobs>& logprobs(std::size_t choice) const { return choices_.at(choice).logprobs; }
  // The final result of a finished choice.
  const protocol::FinalResult& final_result(std::size_t choice) const;
  // Counted as OpenAI counts n choices: each prompt once, the completions summed.
  protocol::Usage usage() const;

 private:
  struct Choice {
    std::unique_ptr<OutputParser> parser;
    AssistantMessage message;
    std::string pending_text;  // a partial UTF-8 character, held for the next event
    std::int64_t next_seq = 0;
    bool started = false;
    std::optional<protocol::FinalResult> final_result;
    std::vector<protocol::OutputLogprobs> logprobs;
    std::int64_t logprobs_text_bytes = 0;  // the bytes of the tokens in `logprobs`
  };

  void take_logprobs(Choice& choice, const protocol::Event& event, Step& step) const;

  std::vector<std::string> job_ids_;
  std::vector<std::size_t> prompt_of_choice_;
  bool first_tool_call_only_ = false;
  bool logprobs_asked_ = false;
  std::vector<Choice> choices_;
  std::optional<ApiError> failure_;
};

}  // namespace flashq::gateway
