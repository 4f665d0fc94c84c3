// What chat completions and completions write alike (docs/gateway.md, "Chat completions and
// completions"): streamed, one chunk object per choice entry an event settles, sent by the server
// as SSE `data:` lines; whole, one response object once every choice finished. Both carry `id`
// (choice 0's job id; the server names every job in the x-flashq-job-id header), `object`,
// `created`, `model`, `choices` and, where asked, `usage`.
//
// The server feeds every EVENT of choice i's job to on_event(i, event) and sends what it returns
// (streamed requests only; a whole response renders nothing until response()). Once every choice
// finished, finish() gives the usage chunk (stream_options.include_usage), after which the server
// sends `data: [DONE]`. A job that ends without a completion makes on_event return one
// `{"error": {...}}` payload (OpenAI's error object) and failure() set: the server sends it,
// cancels the other choices' jobs and ends the stream; response() throws that ApiError for a whole
// response. What a choice entry holds is each endpoint's own (ChatCompletionRenderer,
// CompletionRenderer).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway/openai/generation_choices.h"
#include "gateway/openai/generation_request.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

class GenerationStream {
 public:
  virtual ~GenerationStream() = default;

  // The chunk JSON texts this event adds to the stream (none for a whole response).
  std::vector<std::string> on_event(std::size_t choice, const protocol::Event& event);
  // After every choice finished: the usage chunk when asked for, else nothing.
  std::vector<std::string> finish() const;
  // The response's JSON text once every choice finished; throws the failure's ApiError.
  std::string response() const;

  bool done() const { return choices_.all_finished() || choices_.failure().has_value(); }
  const std::optional<ApiError>& failure() const { return choices_.failure(); }
  const std::string& id() const { return choices_.job_id(0); }
  const GenerationChoices& choices() const { return choices_; }

 protected:
  // `chunk_object` and `response_object` name the objects ("chat.completion.chunk",
  // "chat.completion"); `job_ids`: one per choice, in choice order; `created`: Unix seconds.
  GenerationStream(const GenerationRequest& request, std::vector<std::string> job_ids, std::int64_t created,
                   const char* chunk_object, const char* response_object);

  // The choice entries of the chunks one step of a streamed choice adds, in order (none: no chunk).
  virtual std::vector<nlohmann::ordered_json> chunk_choices(std::size_t choice,
                                                            const GenerationChoices::Step& step) const = 0;
  // Choice i of the whole response.
  virtual nlohmann::ordered_json response_choice(std::size_t choice) const = 0;

 private:
  nlohmann::ordered_json envelope(const char* object) const;

  std::string model_;
  bool stream_;
  bool include_usage_;
  std::int64_t created_;
  const char* chunk_object_;
  const char* response_object_;
  GenerationChoices choices_;
};

// OpenAI's JSON text of a value, invalid UTF-8 replaced.
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace flashq::gateway
