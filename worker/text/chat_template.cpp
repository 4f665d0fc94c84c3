// The family default chat templates for plain messages (no tools, no reasoning):
//   ChatML:  <|im_start|>{role}\n{content}<|im_end|>\n   per message, then <|im_start|>assistant\n
//   Llama 3: <|begin_of_text|> then <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
//            per message, then <|start_header_id|>assistant<|end_header_id|>\n\n
#include "worker/text/chat_template.h"

#include "shared/error.h"
#include "worker/text/utf8.h"

namespace flashq {
namespace {

[[noreturn]] void refuse(const std::string& problem) { throw Error(ErrorCode::kInvalidArgument, problem); }

// The request's messages as plain ones; what a default cannot render is refused, never dropped.
std::vector<ChatMessage> plain_messages(const ChatRequest& request, std::string_view family) {
  if (!request.tools.is_null() && !(request.tools.is_array() && request.tools.empty())) {
    refuse("this model has no chat template that takes tools (its checkpoint has none; the " + std::string(family) +
           " default takes plain messages)");
  }
  if (!request.messages.is_array()) refuse("chat messages must be an array");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const ChatJson& m = request.messages[i];
    const std::string at = "chat message " + std::to_string(i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) refuse(at + " has no role");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant") {
      refuse(at + " has role \"" + role + "\"; the " + std::string(family) +
             " default chat template takes roles system, user and assistant");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].empty()) {
      refuse(at + " calls tools; this model has no chat template that takes tool calls");
    }
    if (!m.contains("content") || !m["content"].is_string()) refuse(at + " has no text content");
    out.push_back({role, m["content"].get<std::string>()});
  }
  return out;
}

void check_options(const ChatRequest& request) {
  if (request.options.is_null()) return;
  if (!request.options.is_object()) refuse("chat template options must be an object");
  for (const char* reserved : {"messages", "tools", "add_generation_prompt"}) {
    if (request.options.contains(reserved)) {
      refuse(std::string("chat template options may not set \"") + reserved + "\" (a field of the request itself)");
    }
  }
}

class ChatMlTemplate final : public ChatTemplate {
 public:
  std::string render(const ChatRequest& request) const override {
    check_options(request);
    return format_chatml(plain_messages(request, "ChatML"), request.add_generation_prompt);
  }
};

// What Jinja's `trim` removes (JavaScript's String.prototype.trim in the reference engine):
// Unicode white space and line terminators at both ends.
bool is_trimmed_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

// Invalid UTF-8 becomes U+FFFD first, as the tokenizer would make it of the prompt anyway.
std::string trim(const std::string& content) {
  const std::string text = is_valid_utf8(content) ? content : replace_invalid_utf8(content);
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = begin;
    if (!is_trimmed_space(next_code_point(text, next))) break;
    begin = next;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t previous = end;
    if (!is_trimmed_space(previous_code_point(text, previous))) break;
    end = previous;
  }
  return text.substr(begin, end - begin);
}

class Llama3Template final : public ChatTemplate {
 public:
  std::string render(const ChatRequest& request) const override {
    check_options(request);
    std::string text = "<|begin_of_text|>";
    for (const ChatMessage& message : plain_messages(request, "Llama 3")) {
      text += "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" + trim(message.content) + "<|eot_id|>";
    }
    if (request.add_generation_prompt) text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return text;
  }
};

}  // namespace

ChatJson plain_chat_messages(const std::vector<ChatMessage>& messages) {
  ChatJson out = ChatJson::array();
  for (const ChatMessage& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string text;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      throw Error(ErrorCode::kInvalidArgument, "chat message " + std::to_string(i) + " has role \"" + message.role +
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

const ChatTemplate& llama3_template() {
  static const Llama3Template llama3;
  return llama3;
}

}  // namespace flashq
