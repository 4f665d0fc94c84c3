// A chat completion's jobs' events written as OpenAI writes a chat completion: streamed, as the
// `chat.completion.chunk` objects a server sends as SSE `data:` lines; whole, as one
// `chat.completion` (docs/gateway.md, "Chat completions and completions").
//
// The server feeds every EVENT of choice i's job to on_event(i, event) and sends what it returns
// (streamed requests only; a whole response renders nothing until response()). Per choice the
// stream holds a first chunk with delta.role "assistant", then content, reasoning (as `reasoning`
// and `reasoning_content`, vLLM's names) and tool-call deltas as the output parser settles them,
// then a chunk with finish_reason. Once every choice finished, finish() gives the usage chunk
// (stream_options.include_usage), after which the server sends `data: [DONE]`. A job that ends
// without a completion makes on_event return one `{"error": {...}}` payload (OpenAI's error
// object) and failure() set: the server sends it, cancels the other choices' jobs and ends the
// stream; response() throws that ApiError for a whole response.
//
// `id` of every chunk and of the response is choice 0's job id (the server names all of them in
// the x-flashq-job-id header); tool call ids are call_<job id>_<index>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/openai/generation_choices.h"
#include "gateway/openai/generation_request.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

class ChatCompletionRenderer {
 public:
  // `job_ids`: one per choice, in choice order; `created`: unix seconds.
  ChatCompletionRenderer(const GenerationRequest& request, std::vector<std::string> job_ids, std::int64_t created);

  // The chunk JSON texts this event adds to the stream (none for a whole response).
  std::vector<std::string> on_event(std::size_t choice, const protocol::Event& event);
  // After every choice finished: the usage chunk when asked for, else nothing.
  std::vector<std::string> finish() const;
  // The chat.completion JSON text once every choice finished; throws the failure's ApiError.
  std::string response() const;

  bool done() const { return choices_.all_finished() || choices_.failure().has_value(); }
  const std::optional<ApiError>& failure() const { return choices_.failure(); }
  const std::string& id() const { return choices_.job_id(0); }
  const GenerationChoices& choices() const { return choices_; }

 private:
  std::string chunk(std::size_t choice, nlohmann::ordered_json delta, const nlohmann::json& finish_reason) const;
  std::string finish_reason(std::size_t choice) const;

  std::string model_;
  bool stream_;
  bool include_usage_;
  ToolChoice tool_choice_;
  std::int64_t created_;
  GenerationChoices choices_;
};

}  // namespace flashq::gateway
