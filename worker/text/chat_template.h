// Chat templates: how a chat request (a conversation, the tool definitions, the template's own
// variables) becomes a prompt's text. A model's template comes from its checkpoint
// (load_chat_template.h: the Jinja `chat_template` of tokenizer_config.json or
// chat_template.jinja, rendered by jinja_chat_template.h); a checkpoint without one falls back to
// its family's default, written here in C++ for plain messages only:
//   ChatML (Qwen):  <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
//   Llama 3:        <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
//                   ... <|start_header_id|>assistant<|end_header_id|>\n\n
#pragma once

#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace flashq {

// Key order is kept (ordered_json): templates render tool definitions and arguments key by key.
using ChatJson = nlohmann::ordered_json;

// One chat request, shaped as OpenAI's API and Hugging Face's apply_chat_template take it.
struct ChatRequest {
  // Array of message objects: role, content (string or null), and optionally tool_calls
  // ([{id, type: "function", function: {name, arguments}}]), tool_call_id, name, reasoning_content.
  ChatJson messages = ChatJson::array();
  ChatJson tools;  // array of tool definitions, or null for none
  bool add_generation_prompt = true;
  // Object of template variables (enable_thinking, date_string, ...), or null. It may not set
  // messages, tools or add_generation_prompt.
  ChatJson options;
  // The time a template's strftime_now reads (Llama 3.x and gpt-oss write today's date); none
  // is the time of rendering. Set by tests, to render as a reference did at a known time.
  std::optional<std::chrono::system_clock::time_point> now;
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // The prompt text. kInvalidArgument, with a message fit for the job's FINAL, for a request the
  // template refuses: a role it does not know, tools for a template that takes none, options that
  // set the request's own variables, the template's raise_exception.
  virtual std::string render(const ChatRequest& request) const = 0;
};

// A plain message (no tools, no reasoning), for format_chatml and plain_chat_messages.
struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

// The messages as the objects of ChatRequest::messages.
ChatJson plain_chat_messages(const std::vector<ChatMessage>& messages);

// ChatML as Qwen's chat template writes plain messages. Unknown roles are a kInvalidArgument error.
std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

// The family defaults, one each for the whole process. They take plain messages (role system,
// user or assistant; string content) and refuse tools, tool calls and tool results with
// kInvalidArgument. Options are variables of a template: the Llama 3 default, like ChatML, uses
// none, and both ignore the rest as a Jinja template ignores variables it does not read.
const ChatTemplate& chatml_template();
// As the chat template of Meta's Llama 3 / 3.1 tokenizer_config.json renders plain messages: the
// content trimmed of surrounding whitespace, <|begin_of_text|> before the first message.
const ChatTemplate& llama3_template();

}  // namespace flashq
