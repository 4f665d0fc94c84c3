#include "tools/flashq_bench/agentic_conversation.h"

#include <array>

#include "shared/error.h"
#include "shared/splitmix64.h"

namespace flashq {
namespace {

class Words {
 public:
  explicit Words(uint64_t seed) : state_(splitmix64(seed)) {}
  uint64_t next(uint64_t bound) {
    state_ = splitmix64(state_);
    return state_ % bound;
  }
  const char* word() { return kWords[next(kWords.size())]; }
  std::string sentence(int64_t words) {
    std::string text;
    for (int64_t i = 0; i < words; ++i) text += (i ? " " : "") + std::string(word());
    text[0] = static_cast<char>(text[0] - 'a' + 'A');
    return text + ".";
  }

 private:
  static constexpr std::array<const char*, 48> kWords = {
      "file",    "path",    "query",  "record", "table",   "branch", "commit",   "issue",  "ticket",  "order",
      "invoice", "account", "user",   "report", "metric",  "window", "region",   "bucket", "object",  "message",
      "channel", "thread",  "search", "index",  "limit",   "offset", "cursor",   "field",  "value",   "status",
      "return",  "list",    "read",   "write",  "update",  "delete", "create",   "fetch",  "compare", "summary",
      "between", "with",    "from",   "every",  "current", "recent", "matching", "given"};
  uint64_t state_;
};

constexpr std::array<const char*, 6> kVerbs = {"get", "list", "search", "update", "create", "summarize"};

ChatJson tool_definition(Words& words, int64_t index) {
  ChatJson properties = ChatJson::object();
  ChatJson required = ChatJson::array();
  const int64_t parameters = 2 + static_cast<int64_t>(words.next(3));
  for (int64_t p = 0; p < parameters; ++p) {
    const std::string name = std::string(words.word()) + "_" + words.word();
    properties[name] = {{"type", words.next(3) == 0 ? "integer" : "string"},
                        {"description", words.sentence(4 + static_cast<int64_t>(words.next(5)))}};
    if (p < 2) required.push_back(name);
  }
  const std::string name =
      std::string(kVerbs[words.next(kVerbs.size())]) + "_" + words.word() + "_" + std::to_string(index);
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", words.sentence(8 + static_cast<int64_t>(words.next(8)))},
            {"parameters", {{"type", "object"}, {"properties", properties}, {"required", required}}}}}};
}

constexpr const char* kInstructions =
    "You are an operations agent. Answer the user's requests by calling the tools below, one call per "
    "step, and read each tool's result before the next step.";

}  // namespace

AgenticScript::AgenticScript(const Tokenizer* tokenizer, const ChatTemplate* chat_template, int32_t ordinary_ids,
                             AgenticShape shape, uint64_t seed)
    : tokenizer_(tokenizer), chat_template_(chat_template), ordinary_ids_(ordinary_ids), shape_(shape), seed_(seed) {
  if (shape.system_tokens < 1 || shape.tool_result_tokens < 1 || shape.user_tokens < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--system-tokens, --tool-result-tokens and --user-tokens must be positive");
  }
  if (ordinary_ids < 2) throw Error(ErrorCode::kInvalidArgument, "the model has no ordinary token ids");
  mode_ = "token ids";
  if (tokenizer_ && chat_template_) {
    // Whether the template takes tools and tool results, else plain messages: rendered once with
    // a sample of each kind of message.
    const ChatJson sample = ChatJson::array({{{"role", "system"}, {"content", "s"}},
                                             {{"role", "user"}, {"content", "u"}},
                                             {{"role", "assistant"}, {"content", "a"}}});
    Words words(seed);
    ChatRequest with_tools{.messages = sample, .tools = ChatJson::array({tool_definition(words, 0)})};
    with_tools.messages.push_back({{"role", "tool"}, {"content", "t"}});
    with_tools.messages.push_back({{"role", "user"}, {"content", "u"}});
    ChatRequest plain{.messages = sample, .tools = nullptr};
    try {
      (void)chat_template_->render(with_tools);
      tools_in_request_ = true;
      mode_ = "chat template with tools";
    } catch (const Error&) {
      try {
        (void)chat_template_->render(plain);
        mode_ = "chat template, plain messages";
      } catch (const Error&) {
      }
    }
  }
  if (mode_ == "token ids") {
    system_prompt_tokens_ = shape.system_tokens;
    return;
  }
  // Tools are added until the system prompt, as the template writes it, has the tokens asked for.
  Words words(seed ^ 0x5157u);
  for (int64_t index = 0; system_prompt_tokens_ < shape.system_tokens; ++index) {
    tools_.push_back(tool_definition(words, index));
    system_text_ = kInstructions;
    if (!tools_in_request_) {
      system_text_ += "\n\n# Tools\n\nCall a tool by writing its name and its arguments as JSON. The tools:\n<tools>";
      for (const ChatJson& tool : tools_) system_text_ += "\n" + tool.dump();
      system_text_ += "\n</tools>";
    }
    ChatRequest system = request_for(ChatJson::array({{{"role", "system"}, {"content", system_text_}}}));
    system.add_generation_prompt = false;
    const int64_t before = system_prompt_tokens_;
    system_prompt_tokens_ = static_cast<int64_t>(tokenizer_->encode(chat_template_->render(system)).size());
    if (system_prompt_tokens_ <= before) {
      throw Error(ErrorCode::kInvalidArgument, "the chat template writes neither the system message nor the tools it "
                                               "is given, so the system prompt cannot grow: use --token-ids");
    }
  }
}

ChatRequest AgenticScript::request_for(const ChatJson& messages) const {
  ChatRequest request{.messages = messages, .tools = tools_in_request_ ? tools_ : ChatJson(nullptr)};
  request.add_generation_prompt = true;
  return request;
}

std::string AgenticScript::tool_result_text(uint64_t seed) const {
  Words words(seed);
  ChatJson rows = ChatJson::array();
  std::string text;
  // Rows are added until the result has the tokens asked for.
  while (static_cast<int64_t>(tokenizer_->encode(text).size()) < shape_.tool_result_tokens) {
    rows.push_back({{"id", words.next(100000)}, {"name", words.word()}, {"note", words.sentence(5)}});
    text = ChatJson{{"status", "ok"}, {"rows", rows}}.dump();
  }
  return text;
}

std::string AgenticScript::user_text(uint64_t seed) const {
  Words words(seed);
  std::string text = "Next:";
  while (static_cast<int64_t>(tokenizer_->encode(text).size()) < shape_.user_tokens) text += " " + words.sentence(6);
  return text;
}

std::vector<int32_t> AgenticScript::random_ids(int64_t count, uint64_t seed) const {
  Words words(seed);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < count; ++i)
    ids.push_back(static_cast<int32_t>(words.next(static_cast<uint64_t>(ordinary_ids_))));
  return ids;
}

AgenticConversation::AgenticConversation(const AgenticScript& script, int64_t index) : script_(script), index_(index) {
  const uint64_t seed = splitmix64(script.seed_ + 1000003ull * static_cast<uint64_t>(index + 1));
  if (!script.tokenizer_ || script.mode_ == "token ids") {
    prompt_ = script.random_ids(script.shape_.system_tokens, script.seed_);
    const std::vector<int32_t> user = script.random_ids(script.shape_.user_tokens, seed);
    prompt_.insert(prompt_.end(), user.begin(), user.end());
    return;
  }
  messages_.push_back({{"role", "system"}, {"content", script.system_text_}});
  messages_.push_back({{"role", "user"}, {"content", script.user_text(seed)}});
  prompt_ = script.tokenizer_->encode(script.chat_template_->render(script.request_for(messages_)));
}

void AgenticConversation::add_turn(std::span<const int32_t> reply) {
  ++turn_;
  prompt_.insert(prompt_.end(), reply.begin(), reply.end());
  const uint64_t seed = splitmix64(script_.seed_ + 1000003ull * static_cast<uint64_t>(index_ + 1) +
                                   7919ull * static_cast<uint64_t>(turn_));
  if (script_.mode_ == "token ids") {
    const std::vector<int32_t> more =
        script_.random_ids(script_.shape_.tool_result_tokens + script_.shape_.user_tokens, seed);
    prompt_.insert(prompt_.end(), more.begin(), more.end());
    return;
  }
  // The reply's text stands as a marker: what follows it in the rendering is what this turn
  // appends after the reply's ids.
  const std::string marker = "[reply " + std::to_string(turn_) + "]";
  messages_.push_back({{"role", "assistant"}, {"content", marker}});
  const std::string result = "<tool_response>\n" + script_.tool_result_text(seed) + "\n</tool_response>";
  if (script_.tools_in_request_) {
    messages_.push_back({{"role", "tool"}, {"content", script_.tool_result_text(seed)}});
  } else {
    messages_.push_back({{"role", "user"}, {"content", result}});
  }
  messages_.push_back({{"role", "user"}, {"content", script_.user_text(seed + 1)}});
  const std::string text = script_.chat_template_->render(script_.request_for(messages_));
  const size_t at = text.rfind(marker);
  if (at == std::string::npos) {
    throw Error(ErrorCode::kUnsupported, "the chat template does not write an assistant's reply back; use --token-ids");
  }
  const std::vector<int32_t> more = script_.tokenizer_->encode(std::string_view(text).substr(at + marker.size()));
  prompt_.insert(prompt_.end(), more.begin(), more.end());
}

}  // namespace flashq
