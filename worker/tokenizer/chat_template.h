// Chat templates: how a conversation of plain messages (no tools, no reasoning) becomes a
// prompt's text. A model family provides its own (TargetModel::chat_template); Qwen models use
// ChatML:
//   <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
#pragma once

#include <string>
#include <vector>

namespace flashq {

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // With add_generation_prompt the text ends with the opening of an assistant turn. A role the
  // template does not know is a kInvalidArgument error naming the message.
  virtual std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const = 0;
};

// ChatML as Qwen's chat template writes it. Unknown roles are a kInvalidArgument error.
std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

// The ChatML template (format_chatml), one for the whole process.
const ChatTemplate& chatml_template();

}  // namespace flashq
