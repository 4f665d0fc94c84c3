// The family default chat templates (ChatML, Llama 3): plain messages exactly as the real
// templates they stand in for render them (tests/golden/make_chat_default_golden.js, Hugging
// Face's Jinja engine on the Qwen3 and Llama 3.1 templates), and a clear refusal of what they
// cannot render.
#include "worker/text/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>

#include "shared/error.h"
#include "tests/tokenizer/qwen3_golden.h"

namespace flashq {
namespace {

TEST(ChatTemplate, WritesChatMLWithAGenerationPrompt) {
  std::vector<ChatMessage> messages = {
      {"system", "You are terse."}, {"user", "Hi!"}, {"assistant", "Hello."}, {"user", "2+2?"}};
  EXPECT_EQ(format_chatml(messages),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, EndsAfterTheLastMessageWithoutAGenerationPrompt) {
  EXPECT_EQ(format_chatml({{"user", "multi\nline"}}, false), "<|im_start|>user\nmulti\nline<|im_end|>\n");
  EXPECT_EQ(format_chatml({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, RefusesUnknownRoles) {
  try {
    format_chatml({{"user", "a"}, {"wizard", "b"}});
    ADD_FAILURE() << "accepted role wizard";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("wizard"), std::string::npos) << e.what();
  }
}

void expect_invalid_argument(const std::function<void()>& f, const std::string& mentions) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << mentions;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

ChatRequest plain_request(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) {
  return {.messages = plain_chat_messages(messages), .add_generation_prompt = add_generation_prompt};
}

TEST(ChatMlDefault, RendersPlainMessagesAsFormatChatml) {
  const std::vector<ChatMessage> messages = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", "v"}};
  EXPECT_EQ(chatml_template().render(plain_request(messages)), format_chatml(messages));
  EXPECT_EQ(chatml_template().render(plain_request(messages, false)), format_chatml(messages, false));
}

TEST(Llama3Default, WritesHeadersEndOfTurnsAndTheBeginningOfText) {
  EXPECT_EQ(llama3_template().render(plain_request({{"system", "Be terse."}, {"user", " Hi!\n"}})),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(Llama3Default, KeepsInvalidUtf8AsTheTokenizerWouldMakeIt) {
  EXPECT_EQ(llama3_template().render(plain_request({{"user", " caf\xc3 "}}, false)),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\ncaf\xef\xbf\xbd<|eot_id|>");
}

TEST(ChatTemplateDefaults, MatchTheRealTemplatesOnPlainConversations) {
  const std::filesystem::path path = test::source_dir() / "tests/golden/chat_default_golden.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << ": cannot open (tests/golden/make_chat_default_golden.js writes it)";
  const nlohmann::json golden = nlohmann::json::parse(in);
  size_t checked = 0;
  for (const nlohmann::json& c : golden.at("cases")) {
    const std::string family = c.at("family");
    const ChatTemplate& chat_template = family == "llama3" ? llama3_template() : chatml_template();
    ChatRequest request{.messages = ChatJson(c.at("messages")), .add_generation_prompt = c.at("add_generation_prompt")};
    EXPECT_EQ(chat_template.render(request), c.at("text").get<std::string>())
        << family << " default on " << c.at("messages").dump();
    ++checked;
  }
  EXPECT_GE(checked, 28u);
}

TEST(ChatTemplateDefaults, RefuseToolsToolCallsAndToolResults) {
  for (const ChatTemplate* chat_template : {&chatml_template(), &llama3_template()}) {
    ChatRequest with_tools = plain_request({{"user", "weather?"}});
    with_tools.tools = ChatJson::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
    expect_invalid_argument([&] { chat_template->render(with_tools); },
                            "this model has no chat template that takes tools");

    ChatRequest call = plain_request({{"user", "weather?"}});
    call.messages.push_back(ChatJson::parse(
        R"({"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]})"));
    expect_invalid_argument([&] { chat_template->render(call); }, "tool calls");

    ChatRequest result = plain_request({{"user", "weather?"}});
    result.messages.push_back({{"role", "tool"}, {"content", "18 C"}, {"tool_call_id", "c1"}});
    expect_invalid_argument([&] { chat_template->render(result); }, "\"tool\"");

    expect_invalid_argument([&] { chat_template->render(plain_request({{"user", "a"}, {"wizard", "b"}})); }, "wizard");
  }
}

TEST(ChatTemplateDefaults, OptionsMayNotSetTheRequestsOwnVariables) {
  for (const char* reserved : {"messages", "tools", "add_generation_prompt"}) {
    ChatRequest request = plain_request({{"user", "hi"}});
    request.options = {{reserved, true}};
    expect_invalid_argument([&] { chatml_template().render(request); }, reserved);
    expect_invalid_argument([&] { llama3_template().render(request); }, reserved);
  }
  ChatRequest thinking = plain_request({{"user", "hi"}});
  thinking.options = {{"enable_thinking", false}};
  EXPECT_EQ(chatml_template().render(thinking), format_chatml({{"user", "hi"}}));
}

}  // namespace
}  // namespace flashq
