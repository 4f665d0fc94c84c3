// A completion's jobs' events written as OpenAI writes a legacy completion: streamed, as
// `text_completion` chunks ({choices: [{index, text, logprobs, finish_reason}]}); whole, as one
// `text_completion` object (the contract every generation endpoint shares is GenerationStream's,
// generation_stream.h). The text is the model's own, unparsed, and finish_reason is "stop" or
// "length".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/openai/generation_stream.h"

namespace flashq::gateway {

class CompletionRenderer : public GenerationStream {
 public:
  CompletionRenderer(const GenerationRequest& request, std::vector<std::string> job_ids, std::int64_t created);

 private:
  std::vector<nlohmann::ordered_json> chunk_choices(std::size_t choice,
                                                    const GenerationChoices::Step& step) const override;
  nlohmann::ordered_json response_choice(std::size_t choice) const override;
  std::string finish_reason(std::size_t choice) const;
};

}  // namespace flashq::gateway
