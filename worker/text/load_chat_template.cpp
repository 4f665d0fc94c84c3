#include "worker/text/load_chat_template.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <system_error>

#include "shared/error.h"
#include "shared/json_file.h"
#include "worker/text/jinja_chat_template.h"

namespace flashq {
namespace {

// A list-form checkpoint's two templates: `tool_use` takes the requests with tools.
class NamedChatTemplates final : public ChatTemplate {
 public:
  NamedChatTemplates(std::unique_ptr<ChatTemplate> fallback, std::unique_ptr<ChatTemplate> tool_use)
      : default_(std::move(fallback)), tool_use_(std::move(tool_use)) {}

  std::string render(const ChatRequest& request) const override {
    const bool tools = !request.tools.is_null();
    return (tools && tool_use_ ? *tool_use_ : *default_).render(request);
  }

 private:
  std::unique_ptr<ChatTemplate> default_;
  std::unique_ptr<ChatTemplate> tool_use_;  // null when the checkpoint names none
};

// The list form's templates; `origin` prefixes its errors (the caller names the result's origin).
LoadedChatTemplate from_list(const nlohmann::json& list, const ChatJson& special_tokens, const std::string& origin) {
  std::optional<std::string> fallback;
  std::optional<std::string> tool_use;
  for (const nlohmann::json& entry : list) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      throw Error(ErrorCode::kBadConfig,
                  origin + ": each entry of the list must be {\"name\": string, \"template\": string}");
    }
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") fallback = entry["template"].get<std::string>();
    if (name == "tool_use") tool_use = entry["template"].get<std::string>();
  }
  if (!fallback) throw Error(ErrorCode::kBadConfig, origin + ": the list of chat templates has none named \"default\"");
  auto parsed = [&](const std::string& source, const std::string& name) {
    return std::make_unique<JinjaChatTemplate>(source, special_tokens, origin + " \"" + name + "\"");
  };
  return LoadedChatTemplate{std::make_shared<NamedChatTemplates>(parsed(*fallback, "default"),
                                                                 tool_use ? parsed(*tool_use, "tool_use") : nullptr),
                            origin, *fallback + (tool_use ? "\n" + *tool_use : "")};
}

std::optional<LoadedChatTemplate> from_tokenizer_config(const std::filesystem::path& path, ChatJson& special_tokens) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const nlohmann::json config = read_json_file(path);
  special_tokens = special_token_strings(ChatJson(config));
  const std::string origin = path.filename().string() + " chat_template";
  const auto it = config.is_object() ? config.find("chat_template") : config.end();
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    std::string source = it->get<std::string>();
    auto parsed = std::make_shared<JinjaChatTemplate>(source, special_tokens, origin);
    return LoadedChatTemplate{std::move(parsed), path.filename().string(), std::move(source)};
  }
  if (it->is_array()) {
    LoadedChatTemplate loaded = from_list(*it, special_tokens, origin);
    loaded.origin = path.filename().string();
    return loaded;
  }
  throw Error(ErrorCode::kBadConfig, origin + ": must be a string or a list of {name, template}");
}

LoadedChatTemplate family_default(const std::filesystem::path& model_dir) {
  const nlohmann::json config = read_json_file(model_dir / "config.json");
  const std::string model_type = config.is_object() && config.contains("model_type") && config["model_type"].is_string()
                                     ? config["model_type"].get<std::string>()
                                     : "";
  LoadedChatTemplate out;
  if (model_type == "qwen3" || model_type == "qwen3_moe") {
    out = {std::shared_ptr<const ChatTemplate>(&chatml_template(), [](const ChatTemplate*) {}), "the ChatML default"};
  } else if (model_type == "llama") {
    out = {std::shared_ptr<const ChatTemplate>(&llama3_template(), [](const ChatTemplate*) {}), "the Llama 3 default"};
  } else {
    throw Error(ErrorCode::kUnsupported,
                model_dir.string() +
                    ": no chat template (tokenizer_config.json chat_template or chat_template.jinja) "
                    "and no default for model_type \"" +
                    model_type + "\" (defaults: qwen3, qwen3_moe, llama)");
  }
  spdlog::warn(
      "{}: no chat template in the checkpoint (tokenizer_config.json chat_template or chat_template.jinja); "
      "chat prompts use {} of model_type {}, which a fine-tuned checkpoint may not expect",
      model_dir.string(), out.origin, model_type);
  return out;
}

}  // namespace

LoadedChatTemplate load_chat_template(const std::filesystem::path& model_dir) {
  ChatJson special_tokens = ChatJson::object();
  if (auto loaded = from_tokenizer_config(model_dir / "tokenizer_config.json", special_tokens))
    return std::move(*loaded);
  const std::filesystem::path jinja_path = model_dir / "chat_template.jinja";
  std::error_code ec;
  if (std::filesystem::is_regular_file(jinja_path, ec)) {
    std::string source = read_text_file(jinja_path);
    auto parsed = std::make_shared<JinjaChatTemplate>(source, special_tokens, jinja_path.filename().string());
    return {std::move(parsed), jinja_path.filename().string(), std::move(source)};
  }
  return family_default(model_dir);
}

}  // namespace flashq
