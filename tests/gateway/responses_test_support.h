// What the Responses API translation tests share: the models a test gateway serves, job events
// made from a completion's text cut in pieces, a renderer run over them, and a client's view of
// the stream: the events folded into the output the way OpenAI's SDK accumulates them
// (openai-node's accumulateResponse), with every rule of the stream checked on the way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/openai/responses_renderer.h"
#include "gateway/openai/responses_request.h"

namespace flashq::gateway::testing {

// "qwen3" (Hermes calls, <think> reasoning), "qwen3-thinking" (the same, the template opens
// <think>), "llama3" (Llama 3 JSON calls), "plain" (no tool-call parser).
ModelDirectory test_models();

ResponsesJson parse_body(std::string_view json_text);
ResponsesRequest read(std::string_view json_text, const ResponsesJobOptions& options = {});

protocol::FinalResult final_of(protocol::FinishReason reason, std::int64_t prompt_tokens = 7,
                               std::int64_t completion_tokens = 11);

// One job event per piece (seq 0, 1, ...), the last carrying `final_result`.
std::vector<protocol::Event> job_events(const std::string& job_id, const std::vector<std::string>& pieces,
                                        const protocol::FinalResult& final_result);
// The text cut after every `stride` bytes.
std::vector<std::string> cut_every(std::string_view text, std::size_t stride);

struct Rendered {
  std::vector<StreamedEvent> events;
  ResponsesJson object;  // response_object() after the last event
};

Rendered render(const ResponseSettings& settings, const std::string& response_id, std::int64_t created_at,
                const std::vector<protocol::Event>& events);

std::vector<std::string> event_types(const std::vector<StreamedEvent>& events);

// Checks the stream as a client reads it (sequence numbers 0, 1, ... matching each event's JSON,
// the type field matching, deltas only inside their open item and part, done events holding the
// concatenated deltas, a created event first and at most one terminal event, last) and returns
// the output folded from the item and part events, which a correct stream makes equal to the
// terminal event's response.output.
ResponsesJson fold_stream(const std::vector<StreamedEvent>& events);

}  // namespace flashq::gateway::testing
