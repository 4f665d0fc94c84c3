// Chat formatting. Qwen models use ChatML:
//   <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
#pragma once

#include <string>
#include <vector>

namespace flashq {

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

// With add_generation_prompt the text ends with the opening of an assistant turn.
// Unknown roles are a kInvalidArgument error.
std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

}  // namespace flashq
