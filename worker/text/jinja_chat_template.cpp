#include "worker/text/jinja_chat_template.h"

#include "shared/error.h"

namespace flashq {
namespace {

constexpr const char* kSpecialTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                             "pad_token", "cls_token", "mask_token"};

jinja::Template parse_template(std::string_view source, const std::string& origin) {
  try {
    return jinja::Template::parse(source);
  } catch (const Error& e) {
    throw Error(e.code(), origin + ": " + e.what());
  }
}

}  // namespace

ChatJson special_token_strings(const ChatJson& tokenizer_config) {
  ChatJson out = ChatJson::object();
  if (!tokenizer_config.is_object()) return out;
  for (const char* key : kSpecialTokenKeys) {
    const auto it = tokenizer_config.find(key);
    if (it == tokenizer_config.end()) continue;
    if (it->is_string() && !it->get<std::string>().empty()) {
      out[key] = *it;
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      out[key] = (*it)["content"];
    }
  }
  return out;
}

JinjaChatTemplate::JinjaChatTemplate(std::string_view source, ChatJson special_tokens, const std::string& origin)
    : template_(parse_template(source, origin)), special_tokens_(std::move(special_tokens)) {}

std::string JinjaChatTemplate::render(const ChatRequest& request) const {
  ChatJson context = ChatJson::object();
  context["messages"] = request.messages;
  context["add_generation_prompt"] = request.add_generation_prompt;
  // null, not absent, when there are none: templates test `tools is not none`. Documents (for
  // retrieval templates) may come as an option.
  context["tools"] = request.tools;
  context["documents"] = nullptr;
  for (const auto& [key, value] : special_tokens_.items()) context[key] = value;
  if (!request.options.is_null()) {
    if (!request.options.is_object())
      throw Error(ErrorCode::kInvalidArgument, "chat template options must be an object");
    for (const auto& [key, value] : request.options.items()) {
      if (key == "messages" || key == "tools" || key == "add_generation_prompt") {
        throw Error(ErrorCode::kInvalidArgument,
                    "chat template options may not set \"" + key + "\" (a field of the request itself)");
      }
      context[key] = value;
    }
  }
  jinja::RenderOptions options;
  if (request.now) options.now = *request.now;
  return template_.render(context, options);
}

}  // namespace flashq
