// A chat completion's jobs' events written as OpenAI writes a chat completion: streamed, as
// `chat.completion.chunk` objects; whole, as one `chat.completion` (the contract every
// generation endpoint shares is GenerationStream's, generation_stream.h).
//
// Per choice the stream holds a first chunk with delta.role "assistant", then content, reasoning
// (as `reasoning` and `reasoning_content`, vLLM's names) and tool-call deltas as the output parser
// settles them, then a chunk with finish_reason. Tool call ids are call_<job id>_<index>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/openai/generation_stream.h"

namespace flashq::gateway {

class ChatCompletionRenderer : public GenerationStream {
 public:
  // `job_ids`: one per choice, in choice order; `created`: unix seconds.
  ChatCompletionRenderer(const GenerationRequest& request, std::vector<std::string> job_ids, std::int64_t created);

 private:
  std::vector<nlohmann::ordered_json> chunk_choices(std::size_t choice,
                                                    const GenerationChoices::Step& step) const override;
  nlohmann::ordered_json response_choice(std::size_t choice) const override;
  std::string finish_reason(std::size_t choice) const;

  ToolChoice tool_choice_;
};

}  // namespace flashq::gateway
