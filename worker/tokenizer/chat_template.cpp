// ChatML as Qwen's chat template writes it for plain messages (no tools, no reasoning):
//   <|im_start|>{role}\n{content}<|im_end|>\n   per message, then <|im_start|>assistant\n
#include "worker/tokenizer/chat_template.h"

#include "shared/error.h"

namespace flashq {
namespace {

class ChatMlTemplate final : public ChatTemplate {
 public:
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const override {
    return format_chatml(messages, add_generation_prompt);
  }
};

}  // namespace

std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string text;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      throw Error(ErrorCode::kInvalidArgument,
                  "chat message " + std::to_string(i) + " has role \"" + message.role +
                      "\"; ChatML roles are system, user and assistant");
    }
    text += "<|im_start|>";
    text += message.role;
    text += '\n';
    text += message.content;
    text += "<|im_end|>\n";
  }
  if (add_generation_prompt) text += "<|im_start|>assistant\n";
  return text;
}

const ChatTemplate& chatml_template() {
  static const ChatMlTemplate chatml;
  return chatml;
}

}  // namespace flashq
