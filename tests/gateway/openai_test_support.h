// What the OpenAI translation tests share: a model directory of each output format, requests
// written as JSON text, the ApiError a reading throws, job events, and a client's accumulation
// of streamed chat chunks (as the OpenAI SDK's ChatCompletionStream folds them).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/openai/api_error.h"
#include "gateway/openai/generation_request.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway::testing {

// "qwen3" (Hermes calls, <think> reasoning, 4096 tokens), "qwen3-thinking" (the same, its prompt
// opening <think>), "llama" (Llama 3 JSON calls, 8192 tokens), "plain" (no tool-call format,
// context unknown).
ModelDirectory test_models();

// Parsed keeping key order, as the server parses a request body.
nlohmann::ordered_json body(std::string_view json_text);

// The ApiError reading `body` throws; fails the test (and returns a 0-status error) when none.
ApiError chat_error(const nlohmann::ordered_json& body, const RequestExtensions& ext = {});
ApiError completion_error(const nlohmann::ordered_json& body, const RequestExtensions& ext = {});

// Events of one job: one per piece of text (seq 0, 1, ...), the last carrying the final result.
std::vector<protocol::Event> job_events(const std::vector<std::string>& pieces,
                                        protocol::FinishReason reason = protocol::FinishReason::kStop,
                                        protocol::Usage usage = {10, 5},
                                        std::optional<std::string> error = std::nullopt);

// A streamed chat completion as a client accumulates it: per choice index, the message
// (content, reasoning, reasoning_content, tool_calls) and finish_reason; also checks the rules
// every chunk keeps (object, id, created, model, one choice, the role first).
struct AccumulatedChoice {
  bool saw_role = false;
  std::string content;
  std::string reasoning;
  std::string reasoning_content;
  nlohmann::json tool_calls = nlohmann::json::array();  // [{id, type, function: {name, arguments}}]
  std::optional<std::string> finish_reason;
  int chunks = 0;
};
struct AccumulatedChat {
  std::vector<AccumulatedChoice> choices;
  std::optional<nlohmann::json> usage;
  int usage_chunks = 0;
};
void accumulate_chat_chunk(AccumulatedChat& into, const std::string& chunk_text, const std::string& id,
                           std::int64_t created, const std::string& model);

}  // namespace flashq::gateway::testing
