// Completion chunks and the whole text_completion: each choice's text.
#include "gateway/openai/completion_stream.h"

#include "gateway/openai/logprobs_json.h"

namespace flashq::gateway {
namespace {

nlohmann::ordered_json choice_object(std::size_t index, const std::string& text, const nlohmann::json& finish_reason,
                                     nlohmann::ordered_json logprobs) {
  return {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_reason}};
}

}  // namespace

CompletionRenderer::CompletionRenderer(const GenerationRequest& request, std::vector<std::string> job_ids,
                                       std::int64_t created)
    : GenerationStream(request, std::move(job_ids), created, "text_completion", "text_completion") {}

std::string CompletionRenderer::finish_reason(std::size_t choice) const {
  return choices().final_result(choice).finish_reason == protocol::FinishReason::kLength ? "length" : "stop";
}

std::vector<nlohmann::ordered_json> CompletionRenderer::chunk_choices(std::size_t choice,
                                                                      const GenerationChoices::Step& step) const {
  std::string text;
  for (const OutputDelta& delta : step.deltas) text += delta.text;  // a plain parser: content only
  const bool has_logprobs = !step.logprobs.empty();
  if (!step.finished && text.empty() && !has_logprobs) return {};
  nlohmann::ordered_json logprobs =
      has_logprobs ? completion_logprobs_json(step.logprobs, step.logprobs_text_offset) : nlohmann::ordered_json();
  return {choice_object(choice, text, step.finished ? nlohmann::json(finish_reason(choice)) : nlohmann::json(),
                        std::move(logprobs))};
}

nlohmann::ordered_json CompletionRenderer::response_choice(std::size_t choice) const {
  nlohmann::ordered_json logprobs = choices().logprobs_asked()
                                        ? completion_logprobs_json(choices().logprobs(choice), 0)
                                        : nlohmann::ordered_json();
  return choice_object(choice, choices().message(choice).content, finish_reason(choice), std::move(logprobs));
}

}  // namespace flashq::gateway
