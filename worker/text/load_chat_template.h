// Which chat template a model directory gets, in this order:
//   1. `chat_template` in tokenizer_config.json: a string of Jinja, or Hugging Face's list form
//      [{name, template}, ...], of which `default` renders requests without tools and `tool_use`
//      (when present, else `default`) requests with tools; the other named ones are not used;
//   2. chat_template.jinja in the directory;
//   3. the family default by config.json's model_type (qwen3 and qwen3_moe: ChatML, llama:
//      Llama 3), with a warning in the log, since a fine-tuned checkpoint may expect another
//      format (gpt-oss checkpoints ship their harmony template and have no default);
//   4. none: kUnsupported naming the model type.
// A template the Jinja engine does not implement is refused here (kUnsupported naming the
// construct and the file), so a process fails to start rather than render prompts wrong.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "worker/text/chat_template.h"

namespace flashq {

struct LoadedChatTemplate {
  std::shared_ptr<const ChatTemplate> chat_template;
  std::string origin;  // "tokenizer_config.json", "chat_template.jinja" or "the ChatML default"
  // The Jinja source (the list form's templates one after the other), for what it shows of the
  // model's output formats (shared/output_format_detection.h); empty for a family default.
  std::string source;
};

// Errors: kBadConfig for a tokenizer_config.json that is not JSON or whose chat_template has the
// wrong shape; kUnsupported as above; kInvalidArgument for a template with a syntax error; what
// reading config.json raises when it is needed.
LoadedChatTemplate load_chat_template(const std::filesystem::path& model_dir);

}  // namespace flashq
