// A completion's jobs' events written as OpenAI writes a legacy completion: streamed, as
// `text_completion` chunks ({choices: [{index, text, logprobs, finish_reason}]}) sent as SSE
// `data:` lines; whole, as one `text_completion` object. The same contract as
// ChatCompletionRenderer (chat_completion_stream.h): on_event per job EVENT, finish() for the
// usage chunk, response() for a whole response, an `{"error": ...}` payload and failure() for a
// job that ends without a completion; `id` is choice 0's job id. The text is the model's own,
// unparsed, and finish_reason is "stop" or "length".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/openai/generation_choices.h"
#include "gateway/openai/generation_request.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

class CompletionRenderer {
 public:
  CompletionRenderer(const GenerationRequest& request, std::vector<std::string> job_ids, std::int64_t created);

  std::vector<std::string> on_event(std::size_t choice, const protocol::Event& event);
  std::vector<std::string> finish() const;
  std::string response() const;

  bool done() const { return choices_.all_finished() || choices_.failure().has_value(); }
  const std::optional<ApiError>& failure() const { return choices_.failure(); }
  const std::string& id() const { return choices_.job_id(0); }
  const GenerationChoices& choices() const { return choices_; }

 private:
  nlohmann::ordered_json envelope() const;
  std::string finish_reason(std::size_t choice) const;

  std::string model_;
  bool stream_;
  bool include_usage_;
  std::int64_t created_;
  GenerationChoices choices_;
};

}  // namespace flashq::gateway
