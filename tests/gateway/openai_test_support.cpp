// Shared pieces of the OpenAI translation tests.
#include "tests/gateway/openai_test_support.h"

#include <gtest/gtest.h>

namespace flashq::gateway::testing {

ModelDirectory test_models() {
  ModelDirectory models;
  const OutputFormat qwen{ToolCallFormat::kHermes, ReasoningFormat::kThinkTags};
  models["qwen3"] = ServedModel{"qwen3", 4096, qwen, false};
  models["qwen3-thinking"] = ServedModel{"qwen3-thinking", 4096, qwen, true};
  models["llama"] = ServedModel{"llama", 8192, {ToolCallFormat::kLlama3Json, ReasoningFormat::kNone}, false};
  models["plain"] = ServedModel{"plain", 0, {}, false};
  models["gpt-oss"] = ServedModel{"gpt-oss", 8192, {ToolCallFormat::kHarmony, ReasoningFormat::kHarmony}, false};
  return models;
}

nlohmann::ordered_json body(std::string_view json_text) { return nlohmann::ordered_json::parse(json_text); }

namespace {

template <typename Read>
ApiError expect_error(Read read, const nlohmann::ordered_json& body, const RequestExtensions& ext) {
  try {
    read(body, test_models(), ext);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError for " << body.dump();
  return ApiError(0, "", "", "none");
}

}  // namespace

ApiError chat_error(const nlohmann::ordered_json& body, const RequestExtensions& ext) {
  return expect_error(read_chat_completion_request, body, ext);
}

ApiError completion_error(const nlohmann::ordered_json& body, const RequestExtensions& ext) {
  return expect_error(read_completion_request, body, ext);
}

std::vector<protocol::Event> job_events(const std::vector<std::string>& pieces, protocol::FinishReason reason,
                                        protocol::Usage usage, std::optional<std::string> error) {
  std::vector<protocol::Event> events;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    protocol::Event event;
    event.seq = static_cast<std::int64_t>(i);
    event.text = pieces[i];
    events.push_back(event);
  }
  if (events.empty()) events.emplace_back();
  protocol::FinalResult final;
  final.finish_reason = reason;
  final.usage = usage;
  final.error = error;
  events.back().final_result = final;
  return events;
}

void accumulate_chat_chunk(AccumulatedChat& into, const std::string& chunk_text, const std::string& id,
                           std::int64_t created, const std::string& model) {
  const nlohmann::json chunk = nlohmann::json::parse(chunk_text);
  EXPECT_EQ(chunk.at("id"), id);
  EXPECT_EQ(chunk.at("object"), "chat.completion.chunk");
  EXPECT_EQ(chunk.at("created"), created);
  EXPECT_EQ(chunk.at("model"), model);
  if (chunk.at("choices").empty()) {
    ++into.usage_chunks;
    into.usage = chunk.at("usage");
    return;
  }
  ASSERT_EQ(chunk.at("choices").size(), 1u);
  const nlohmann::json& c = chunk["choices"][0];
  const std::size_t index = c.at("index").get<std::size_t>();
  if (into.choices.size() <= index) into.choices.resize(index + 1);
  AccumulatedChoice& choice = into.choices[index];
  EXPECT_FALSE(choice.finish_reason.has_value()) << "a chunk after the choice's finish_reason";
  ++choice.chunks;
  const nlohmann::json& delta = c.at("delta");
  EXPECT_TRUE(c.at("logprobs").is_null());
  if (delta.contains("role")) {
    EXPECT_FALSE(choice.saw_role);
    EXPECT_EQ(delta["role"], "assistant");
    choice.saw_role = true;
  }
  EXPECT_TRUE(choice.saw_role) << "the first chunk of a choice carries the role";
  if (delta.contains("content")) choice.content += delta["content"].get<std::string>();
  if (delta.contains("reasoning")) choice.reasoning += delta["reasoning"].get<std::string>();
  if (delta.contains("reasoning_content")) choice.reasoning_content += delta["reasoning_content"].get<std::string>();
  if (delta.contains("tool_calls")) {
    for (const nlohmann::json& call : delta["tool_calls"]) {
      const std::size_t i = call.at("index").get<std::size_t>();
      if (call.contains("id")) {
        // A call starts with its id, type and name, in index order.
        EXPECT_EQ(i, choice.tool_calls.size());
        EXPECT_EQ(call.at("type"), "function");
        choice.tool_calls.push_back({{"id", call["id"]},
                                     {"type", "function"},
                                     {"function", {{"name", call.at("function").at("name")}, {"arguments", ""}}}});
      }
      ASSERT_LT(i, choice.tool_calls.size()) << "arguments before the call's start";
      if (call.contains("function") && call["function"].contains("arguments")) {
        std::string& arguments = choice.tool_calls[i]["function"]["arguments"].get_ref<std::string&>();
        arguments += call["function"]["arguments"].get<std::string>();
      }
    }
  }
  if (!c.at("finish_reason").is_null()) choice.finish_reason = c["finish_reason"].get<std::string>();
}

}  // namespace flashq::gateway::testing
