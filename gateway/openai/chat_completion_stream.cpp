// Chat completion chunks and the whole chat.completion, from the choices' deltas.
#include "gateway/openai/chat_completion_stream.h"

#include <map>
#include <span>

#include "gateway/openai/logprobs_json.h"

namespace flashq::gateway {
namespace {

// One delta object for the deltas one event settled. Content, reasoning and each call's
// arguments are accumulated separately by every client, so folding an event's deltas into one
// object keeps what each field concatenates to.
nlohmann::ordered_json delta_object(const OutputDeltas& deltas) {
  std::string content, reasoning;
  bool has_content = false, has_reasoning = false;
  std::vector<int> call_order;
  std::map<int, nlohmann::ordered_json> calls;
  for (const OutputDelta& delta : deltas) {
    switch (delta.kind) {
      case DeltaKind::kContent:
        content += delta.text;
        has_content = true;
        break;
      case DeltaKind::kReasoning:
        reasoning += delta.text;
        has_reasoning = true;
        break;
      case DeltaKind::kToolCallStart:
      case DeltaKind::kToolCallArguments: {
        auto [it, added] = calls.try_emplace(delta.index);
        nlohmann::ordered_json& call = it->second;
        if (added) {
          call_order.push_back(delta.index);
          call["index"] = delta.index;
        }
        if (delta.kind == DeltaKind::kToolCallStart) {
          call["id"] = delta.id;
          call["type"] = "function";
          call["function"] = {{"name", delta.name}, {"arguments", ""}};
        } else {
          if (!call.contains("function")) call["function"] = {{"arguments", ""}};
          call["function"]["arguments"] = call["function"]["arguments"].get<std::string>() + delta.text;
        }
        break;
      }
      case DeltaKind::kToolCallEnd:
        break;  // chat completions have no event for a finished call
    }
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (has_content) out["content"] = content;
  if (has_reasoning) {
    out["reasoning"] = reasoning;
    out["reasoning_content"] = reasoning;
  }
  if (!call_order.empty()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (int index : call_order) list.push_back(calls[index]);
    out["tool_calls"] = list;
  }
  return out;
}

nlohmann::ordered_json chunk_choice(std::size_t choice, nlohmann::ordered_json delta, const nlohmann::json& finish_reason,
                                    nlohmann::ordered_json logprobs = nullptr) {
  return {{"index", choice}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_reason}};
}

// A choice's `logprobs`: {content: [...], refusal: null} when the request asked, else null.
nlohmann::ordered_json choice_logprobs(bool asked, std::span<const protocol::OutputLogprobs> logprobs) {
  if (!asked) return nullptr;
  return {{"content", token_logprobs_json(logprobs)}, {"refusal", nullptr}};
}

nlohmann::ordered_json message_object(const AssistantMessage& message) {
  nlohmann::ordered_json m = {{"role", "assistant"}};
  // OpenAI: content is null in a message that only calls tools.
  if (message.content.empty() && !message.tool_calls.empty())
    m["content"] = nullptr;
  else
    m["content"] = message.content;
  m["refusal"] = nullptr;
  if (message.reasoning.empty()) {
    m["reasoning"] = nullptr;
    m["reasoning_content"] = nullptr;
  } else {
    m["reasoning"] = message.reasoning;
    m["reasoning_content"] = message.reasoning;
  }
  if (!message.tool_calls.empty()) {
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const ParsedToolCall& call : message.tool_calls) {
      calls.push_back(
          {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    m["tool_calls"] = calls;
  }
  return m;
}

}  // namespace

ChatCompletionRenderer::ChatCompletionRenderer(const GenerationRequest& request, std::vector<std::string> job_ids,
                                               std::int64_t created)
    : GenerationStream(request, std::move(job_ids), created, "chat.completion.chunk", "chat.completion"),
      tool_choice_(request.tool_choice) {}

std::string ChatCompletionRenderer::finish_reason(std::size_t choice) const {
  const GenerationEnd end = choices().final_result(choice).finish_reason == protocol::FinishReason::kLength
                                ? GenerationEnd::kLength
                                : GenerationEnd::kStop;
  // A required or named tool_choice the model did not meet is not an error: flashq cannot
  // constrain the output, so the message is answered as the model wrote it (docs/gateway.md).
  return judge_tool_choice(tool_choice_, choices().message(choice), end).finish_reason;
}

std::vector<nlohmann::ordered_json> ChatCompletionRenderer::chunk_choices(std::size_t choice,
                                                                          const GenerationChoices::Step& step) const {
  std::vector<nlohmann::ordered_json> out;
  if (step.first) out.push_back(chunk_choice(choice, {{"role", "assistant"}, {"content", ""}}, nullptr));
  nlohmann::ordered_json delta = delta_object(step.deltas);
  // Each event's tokens' log-probabilities go with what that event settled; text the output
  // parser still holds comes later, so a chunk may carry them with an empty delta.
  const bool has_logprobs = !step.logprobs.empty();
  nlohmann::ordered_json logprobs = choice_logprobs(has_logprobs, step.logprobs);
  if (step.finished) {
    out.push_back(chunk_choice(choice, std::move(delta), finish_reason(choice), std::move(logprobs)));
  } else if (!delta.empty() || has_logprobs) {
    out.push_back(chunk_choice(choice, std::move(delta), nullptr, std::move(logprobs)));
  }
  return out;
}

nlohmann::ordered_json ChatCompletionRenderer::response_choice(std::size_t choice) const {
  return {{"index", choice},
          {"message", message_object(choices().message(choice))},
          {"logprobs", choice_logprobs(choices().logprobs_asked(), choices().logprobs(choice))},
          {"finish_reason", finish_reason(choice)}};
}

}  // namespace flashq::gateway
