#include "worker/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "shared/error.h"

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
  EXPECT_EQ(format_chatml({{"user", "multi\nline"}}, false),
            "<|im_start|>user\nmulti\nline<|im_end|>\n");
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

}  // namespace
}  // namespace flashq
