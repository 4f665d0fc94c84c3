// Completion chunks and the whole text_completion: each choice's text.
#include "gateway/openai/completion_stream.h"

namespace flashq::gateway {
namespace {

nlohmann::ordered_json choice_object(std::size_t index, const std::string& text, const nlohmann::json& finish_reason) {
  return {{"index", index}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
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
  if (!step.finished && text.empty()) return {};
  return {choice_object(choice, text, step.finished ? nlohmann::json(finish_reason(choice)) : nlohmann::json())};
}

nlohmann::ordered_json CompletionRenderer::response_choice(std::size_t choice) const {
  return choice_object(choice, choices().message(choice).content, finish_reason(choice));
}

}  // namespace flashq::gateway
