#include "worker/serving/serving_model.h"

#include <spdlog/spdlog.h>

#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "shared/output_format_detection.h"
#include "worker/model/model_registry.h"

namespace flashq {

ServingModel ServingModel::load(const std::string& model_dir, const std::string& drafter_dir,
                                const std::string& device) {
  ServingModel s;
  s.backend = make_backend(device);
  // Before the weights: a template the engine cannot render should not cost a load first.
  s.chat_template = load_chat_template(model_dir);
  spdlog::info("{}: chat template from {}", model_dir, s.chat_template.origin);
  s.model = load_target_model(model_dir, *s.backend);
  s.tokenizer = load_tokenizer(model_dir);
  s.output_format = served_output_format(s.chat_template, s.model->config().model_type);
  spdlog::info("{}: context {} tokens, tool calls {}, reasoning {}", model_dir, s.max_model_len(),
               protocol::tool_call_format_name(s.output_format.tool_calls),
               protocol::reasoning_format_name(s.output_format.reasoning));
  if (!drafter_dir.empty()) {
    s.drafter = DFlashDrafter::load(drafter_dir, *s.model, *s.backend);
    s.proposer = std::make_unique<DFlashProposer>(*s.drafter);
  }
  return s;
}

protocol::OutputFormat served_output_format(const LoadedChatTemplate& chat_template, const std::string& model_type) {
  if (chat_template.source.empty()) return {};
  protocol::OutputFormat format = detect_output_format(model_type, chat_template.source);
  if (format.reasoning != protocol::ReasoningFormat::kThinkTags) return format;
  ChatRequest probe;
  probe.messages = plain_chat_messages({{"user", "Hello"}});
  try {
    if (prompt_opens_reasoning(chat_template.chat_template->render(probe))) {
      format.reasoning = protocol::ReasoningFormat::kThinkInPrompt;
    }
  } catch (const Error& e) {  // a template that insists on more (a system message, ...): say so, keep <think>
    spdlog::warn("chat template: rendering one user message failed ({}); reasoning format left at think", e.what());
  }
  return format;
}

}  // namespace flashq
