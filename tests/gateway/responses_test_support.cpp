// Shared helpers of the Responses API translation tests.
#include "tests/gateway/responses_test_support.h"

#include <set>

#include <gtest/gtest.h>

namespace flashq::gateway::testing {

ModelDirectory test_models() {
  ModelDirectory models;
  const OutputFormat qwen{ToolCallFormat::kHermes, ReasoningFormat::kThinkTags};
  models["qwen3"] = {"qwen3", 40960, qwen, false};
  models["qwen3-thinking"] = {"qwen3-thinking", 40960, qwen, true};
  models["llama3"] = {"llama3", 8192, {ToolCallFormat::kLlama3Json, ReasoningFormat::kNone}, false};
  models["plain"] = {"plain", 2048, {}, false};
  return models;
}

ResponsesJson parse_body(std::string_view json_text) { return ResponsesJson::parse(json_text); }

ResponsesRequest read(std::string_view json_text, const ResponsesJobOptions& options) {
  return read_responses_request(parse_body(json_text), test_models(), options);
}

protocol::FinalResult final_of(protocol::FinishReason reason, std::int64_t prompt_tokens,
                               std::int64_t completion_tokens) {
  protocol::FinalResult result;
  result.finish_reason = reason;
  result.usage = {prompt_tokens, completion_tokens};
  if (reason == protocol::FinishReason::kError) result.error = "worker lost its device";
  return result;
}

std::vector<protocol::Event> job_events(const std::string& job_id, const std::vector<std::string>& pieces,
                                        const protocol::FinalResult& final_result) {
  std::vector<protocol::Event> events;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    events.push_back({job_id, static_cast<std::int64_t>(i), {static_cast<std::int32_t>(i)}, pieces[i], std::nullopt});
  }
  if (events.empty()) events.push_back({job_id, 0, {}, "", std::nullopt});
  events.back().final_result = final_result;
  return events;
}

std::vector<std::string> cut_every(std::string_view text, std::size_t stride) {
  std::vector<std::string> pieces;
  for (std::size_t at = 0; at < text.size(); at += stride) pieces.emplace_back(text.substr(at, stride));
  return pieces;
}

Rendered render(const ResponseSettings& settings, const std::string& response_id, std::int64_t created_at,
                const std::vector<protocol::Event>& events) {
  ResponsesRenderer renderer(settings, response_id, created_at);
  Rendered out;
  out.events = renderer.begin();
  for (const protocol::Event& event : events) {
    for (StreamedEvent& e : renderer.on_event(event)) out.events.push_back(std::move(e));
  }
  out.object = renderer.response_object();
  return out;
}

std::vector<std::string> event_types(const std::vector<StreamedEvent>& events) {
  std::vector<std::string> types;
  for (const StreamedEvent& e : events) types.push_back(e.type);
  return types;
}

ResponsesJson fold_stream(const std::vector<StreamedEvent>& events) {
  static const std::set<std::string> kTerminal = {"response.completed", "response.incomplete", "response.failed"};
  ResponsesJson output = ResponsesJson::array();
  std::set<std::size_t> done_items;
  bool terminal_seen = false;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const StreamedEvent& e = events[i];
    SCOPED_TRACE("event " + std::to_string(i) + ": " + e.json_text);
    const ResponsesJson json = ResponsesJson::parse(e.json_text);
    EXPECT_EQ(e.sequence_number, static_cast<std::int64_t>(i));
    EXPECT_EQ(json.at("sequence_number").get<std::int64_t>(), e.sequence_number);
    EXPECT_EQ(json.at("type").get<std::string>(), e.type);
    EXPECT_FALSE(terminal_seen) << "an event after the terminal one";
    if (i == 0) {
      EXPECT_EQ(e.type, "response.created");
    }
    if (kTerminal.count(e.type)) terminal_seen = true;
    if (!json.contains("output_index")) continue;
    const std::size_t index = json.at("output_index").get<std::size_t>();
    if (e.type == "response.output_item.added") {
      EXPECT_EQ(index, output.size()) << "items are added in output order";
      output.push_back(json.at("item"));
      continue;
    }
    if (index >= output.size()) {
      ADD_FAILURE() << "an event for an item not added";
      continue;
    }
    EXPECT_FALSE(done_items.count(index)) << "an event for an item already done";
    ResponsesJson& item = output[index];
    if (json.contains("item_id")) {
      EXPECT_EQ(json.at("item_id"), item.at("id"));
    }
    if (e.type == "response.output_item.done") {
      done_items.insert(index);
      // The done item is what the events built, plus its final status.
      ResponsesJson built = item;
      built["status"] = json.at("item").at("status");
      EXPECT_EQ(built, json.at("item"));
      item = json.at("item");
    } else if (e.type == "response.content_part.added") {
      EXPECT_EQ(json.at("content_index").get<std::size_t>(), item.at("content").size());
      item.at("content").push_back(json.at("part"));
    } else if (e.type == "response.output_text.delta" || e.type == "response.reasoning_text.delta") {
      ResponsesJson& part = item.at("content").at(json.at("content_index").get<std::size_t>());
      EXPECT_EQ(part.at("type"), e.type == "response.output_text.delta" ? "output_text" : "reasoning_text");
      EXPECT_FALSE(json.at("delta").get<std::string>().empty());
      part["text"] = part.at("text").get<std::string>() + json.at("delta").get<std::string>();
      // Each output_text delta carries its tokens' log-probabilities (none unless asked).
      if (json.contains("logprobs")) {
        for (const ResponsesJson& entry : json.at("logprobs")) part.at("logprobs").push_back(entry);
      }
    } else if (e.type == "response.output_text.done" || e.type == "response.reasoning_text.done") {
      const ResponsesJson& part = item.at("content").at(json.at("content_index").get<std::size_t>());
      EXPECT_EQ(part.at("text"), json.at("text"));
      if (json.contains("logprobs")) {
        EXPECT_EQ(part.at("logprobs"), json.at("logprobs"));
      }
    } else if (e.type == "response.content_part.done") {
      EXPECT_EQ(item.at("content").at(json.at("content_index").get<std::size_t>()), json.at("part"));
    } else if (e.type == "response.function_call_arguments.delta") {
      EXPECT_EQ(item.at("type"), "function_call");
      item["arguments"] = item.at("arguments").get<std::string>() + json.at("delta").get<std::string>();
    } else if (e.type == "response.function_call_arguments.done") {
      EXPECT_EQ(item.at("arguments"), json.at("arguments"));
      EXPECT_EQ(item.at("name"), json.at("name"));
    } else {
      ADD_FAILURE() << "unexpected event type " << e.type;
    }
  }
  EXPECT_EQ(done_items.size(), output.size()) << "every item is done by the end";
  if (terminal_seen) {
    EXPECT_EQ(ResponsesJson::parse(events.back().json_text).at("response").at("output"), output);
  }
  return output;
}

}  // namespace flashq::gateway::testing
