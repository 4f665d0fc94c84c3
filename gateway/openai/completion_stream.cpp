// Completion chunks and the whole text_completion, from the choices' text.
#include "gateway/openai/completion_stream.h"

#include "shared/error.h"

namespace flashq::gateway {
namespace {

std::string dump(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json choice_object(std::size_t index, const std::string& text, const nlohmann::json& finish_reason) {
  return {{"index", index}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
}

}  // namespace

CompletionRenderer::CompletionRenderer(const GenerationRequest& request, std::vector<std::string> job_ids,
                                       std::int64_t created)
    : model_(request.model),
      stream_(request.stream),
      include_usage_(request.include_usage),
      created_(created),
      choices_(request, std::move(job_ids)) {}

nlohmann::ordered_json CompletionRenderer::envelope() const {
  return {{"id", id()}, {"object", "text_completion"}, {"created", created_}, {"model", model_}};
}

std::string CompletionRenderer::finish_reason(std::size_t choice) const {
  return choices_.final_result(choice).finish_reason == protocol::FinishReason::kLength ? "length" : "stop";
}

std::vector<std::string> CompletionRenderer::on_event(std::size_t choice, const protocol::Event& event) {
  GenerationChoices::Step step = choices_.on_event(choice, event);
  std::vector<std::string> out;
  if (step.failure) {
    if (stream_) out.push_back(api_error_body(*step.failure));
    return out;
  }
  if (!stream_) return out;
  std::string text;
  for (const OutputDelta& delta : step.deltas) text += delta.text;  // a plain parser: content only
  if (!step.finished && text.empty()) return out;
  nlohmann::ordered_json chunk = envelope();
  chunk["choices"] = nlohmann::ordered_json::array(
      {choice_object(choice, text, step.finished ? nlohmann::json(finish_reason(choice)) : nlohmann::json())});
  if (include_usage_) chunk["usage"] = nullptr;
  out.push_back(dump(chunk));
  return out;
}

std::vector<std::string> CompletionRenderer::finish() const {
  check_invariant(done(), "finish() comes after every choice finished");
  if (!stream_ || !include_usage_ || failure()) return {};
  nlohmann::ordered_json chunk = envelope();
  chunk["choices"] = nlohmann::ordered_json::array();
  chunk["usage"] = usage_json(choices_.usage());
  return {dump(chunk)};
}

std::string CompletionRenderer::response() const {
  if (failure()) throw *failure();
  check_invariant(choices_.all_finished(), "response() comes after every choice finished");
  nlohmann::ordered_json out = envelope();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < choices_.size(); ++i) {
    list.push_back(choice_object(i, choices_.message(i).content, finish_reason(i)));
  }
  out["choices"] = list;
  out["usage"] = usage_json(choices_.usage());
  return dump(out);
}

}  // namespace flashq::gateway
