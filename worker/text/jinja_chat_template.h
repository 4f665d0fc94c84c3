// A checkpoint's own chat template: its Jinja source, parsed once by the engine of
// worker/text/jinja and rendered per request with the variables Hugging Face's
// apply_chat_template passes (transformers.js, whose engine is the reference):
//   messages, add_generation_prompt, tools (null when none), documents (null),
//   the special-token strings of tokenizer_config.json (bos_token, eos_token, unk_token,
//   sep_token, pad_token, cls_token, mask_token: those it names), then the request's options.
#pragma once

#include <string>
#include <string_view>

#include "worker/text/chat_template.h"
#include "worker/text/jinja/template.h"

namespace flashq {

class JinjaChatTemplate final : public ChatTemplate {
 public:
  // Parses `source` now: a construct the engine does not implement is kUnsupported naming it
  // (and its line), a syntax error kInvalidArgument; `origin` ("tokenizer_config.json
  // chat_template") prefixes either. `special_tokens`: an object of name -> string.
  JinjaChatTemplate(std::string_view source, ChatJson special_tokens, const std::string& origin);

  // The options may override a special token (as in transformers) but not messages, tools or
  // add_generation_prompt (kInvalidArgument).
  std::string render(const ChatRequest& request) const override;

 private:
  jinja::Template template_;
  ChatJson special_tokens_;
};

// The special-token strings a tokenizer_config.json names: each of the keys above whose value is
// a string, or an AddedToken object's "content".
ChatJson special_token_strings(const ChatJson& tokenizer_config);

}  // namespace flashq
