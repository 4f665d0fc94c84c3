// Job events rendered as the Responses API's stream: the exact event sequences for text,
// reasoning and tool calls (Hermes and Llama 3 JSON, cut at every point), the endings
// (incomplete, failed, cancelled), the response object after each, and determinism: a fresh
// renderer, also one built from the request recovered from the job, writes the same bytes.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "tests/gateway/responses_test_support.h"

namespace flashq::gateway {
namespace {

using namespace flashq::gateway::testing;
using protocol::FinishReason;
using Types = std::vector<std::string>;

constexpr std::int64_t kCreatedAt = 1767225600;
const std::string kId = "resp_7f3a";

const char* const kWeatherTool = R"("tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}])";

ResponseSettings settings_for(const std::string& body) {
  ResponsesRequest request = read(body);
  request.job.id = kId;
  return request.settings;
}

Rendered run(const std::string& body, const std::vector<std::string>& pieces, FinishReason reason = FinishReason::kStop) {
  return render(settings_for(body), kId, kCreatedAt, job_events(kId, pieces, final_of(reason)));
}

// Every cut of `text` in two, and in pieces of 1, 2, 3 and 7 bytes: the same output items, and
// a stream a client folds into them.
ResponsesJson output_for_every_cut(const std::string& body, const std::string& text) {
  const Rendered whole = run(body, {text});
  const ResponsesJson expected = fold_stream(whole.events);
  EXPECT_EQ(whole.object.at("output"), expected);
  std::vector<std::vector<std::string>> cuts;
  for (std::size_t at = 1; at < text.size(); ++at) cuts.push_back({text.substr(0, at), text.substr(at)});
  for (std::size_t stride : {1, 2, 3, 7}) cuts.push_back(cut_every(text, stride));
  for (const auto& pieces : cuts) {
    const Rendered rendered = run(body, pieces);
    SCOPED_TRACE("first piece: " + pieces.front());
    EXPECT_EQ(fold_stream(rendered.events), expected);
    EXPECT_EQ(rendered.object.at("output"), expected);
  }
  return expected;
}

TEST(ResponsesRenderer, TextStreamsAsOneMessage) {
  const Rendered r = run(R"({"model": "qwen3", "input": "Hi"})", {"Hel", "lo", "!"});
  EXPECT_EQ(event_types(r.events),
            (Types{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                   "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
                   "response.output_text.done", "response.content_part.done", "response.output_item.done",
                   "response.completed"}));
  fold_stream(r.events);
  EXPECT_EQ(r.events[0].json_text,
            R"({"type":"response.created","sequence_number":0,"response":{"id":"resp_7f3a","object":"response",)"
            R"("created_at":1767225600,"status":"in_progress","background":false,"error":null,"incomplete_details":null,)"
            R"("instructions":null,"max_output_tokens":null,"model":"qwen3","output":[],"parallel_tool_calls":true,)"
            R"("previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1,)"
            R"("text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_p":1,)"
            R"("truncation":"disabled","usage":null,"metadata":{}}})");
  EXPECT_EQ(r.events[4].json_text,
            R"({"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_resp_7f3a_0","output_index":0,)"
            R"("content_index":0,"delta":"Hel","logprobs":[]})");
  EXPECT_EQ(r.object.at("status"), "completed");
  EXPECT_EQ(r.object.at("output").dump(),
            R"([{"id":"msg_resp_7f3a_0","type":"message","status":"completed","role":"assistant","content":[)"
            R"({"type":"output_text","annotations":[],"logprobs":[],"text":"Hello!"}]}])");
  EXPECT_EQ(r.object.at("usage").dump(),
            R"({"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,)"
            R"("output_tokens_details":{"reasoning_tokens":0},"total_tokens":18})");
  // The terminal event carries the same object a poll returns.
  EXPECT_EQ(ResponsesJson::parse(r.events.back().json_text).at("response"), r.object);
}

TEST(ResponsesRenderer, ReasoningThenAnswerAreTwoItems) {
  const std::string body = R"({"model": "qwen3", "input": "17*3?"})";
  const ResponsesJson output = output_for_every_cut(body, "<think>\n17 * 3 = 51.\n</think>\n\n51");
  EXPECT_EQ(output.dump(),
            R"([{"id":"rs_resp_7f3a_0","type":"reasoning","status":"completed","summary":[],"content":[)"
            R"({"type":"reasoning_text","text":"17 * 3 = 51."}]},)"
            R"({"id":"msg_resp_7f3a_1","type":"message","status":"completed","role":"assistant","content":[)"
            R"({"type":"output_text","annotations":[],"logprobs":[],"text":"51"}]}])");
  const Rendered r = run(body, {"<think>\n17 * 3", " = 51.\n</think>\n\n51"});
  EXPECT_EQ(event_types(r.events),
            (Types{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                   "response.reasoning_text.delta", "response.reasoning_text.delta", "response.reasoning_text.done",
                   "response.content_part.done", "response.output_item.done", "response.output_item.added",
                   "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                   "response.content_part.done", "response.output_item.done", "response.completed"}));
}

TEST(ResponsesRenderer, LogprobsGoWithTheAnswersTextNotTheReasoning) {
  const std::string body = R"({"model": "qwen3", "input": "17*3?", "include": ["message.output_text.logprobs"]})";
  std::vector<protocol::Event> events = job_events(kId, {"<think>\n51", "\n</think>\n\n", "5", "1"}, final_of(FinishReason::kStop));
  const auto logprob = [](int token, const std::string& bytes) { return protocol::OutputLogprobs{{token, -0.5, bytes}, {}}; };
  events[0].token_ids = {1, 2};
  events[0].logprobs = {logprob(1, "<think>\n"), logprob(2, "51")};
  events[1].token_ids = {3};
  events[1].logprobs = {logprob(3, "\n</think>\n\n")};
  events[2].token_ids = {4};
  events[2].logprobs = {logprob(4, "5")};
  events[3].token_ids = {5};
  events[3].logprobs = {logprob(5, "1")};
  const Rendered r = render(settings_for(body), kId, kCreatedAt, events);
  fold_stream(r.events);
  std::vector<std::string> delta_tokens;
  for (const StreamedEvent& event : r.events) {
    if (event.type != "response.output_text.delta") continue;
    const ResponsesJson delta = ResponsesJson::parse(event.json_text);
    for (const ResponsesJson& entry : delta.at("logprobs")) {
      delta_tokens.push_back(entry.at("token"));
    }
  }
  // The closing tag's token came in an event that settled no text (the parser held it): it goes
  // with the answer's first delta; the reasoning's tokens go nowhere.
  EXPECT_EQ(delta_tokens, (std::vector<std::string>{"\n</think>\n\n", "5", "1"}));
  const ResponsesJson part = r.object.at("output").at(1).at("content").at(0);
  ASSERT_EQ(part.at("logprobs").size(), 3u);
  EXPECT_EQ(part.at("logprobs")[1].dump(), R"({"token":"5","logprob":-0.5,"bytes":[53],"top_logprobs":[]})");
  EXPECT_EQ(r.object.at("top_logprobs"), 0);
}

TEST(ResponsesRenderer, OutputStartsInReasoningWhenTheTemplateOpenedIt) {
  const ResponsesJson output =
      output_for_every_cut(R"({"model": "qwen3-thinking", "input": "Hi"})", "The user greets me.\n</think>\n\nHello!");
  ASSERT_EQ(output.size(), 2u);
  EXPECT_EQ(output[0].at("content")[0].at("text"), "The user greets me.");
  EXPECT_EQ(output[1].at("content")[0].at("text"), "Hello!");
}

TEST(ResponsesRenderer, HermesToolCallsAreFunctionCallItems) {
  const std::string body = std::string(R"({"model": "qwen3", "input": "Weather?", )") + kWeatherTool + "}";
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  const ResponsesJson output = output_for_every_cut(body, text);
  ASSERT_EQ(output.size(), 3u);
  EXPECT_EQ(output[0].at("content")[0].at("text"), "Let me check.");
  EXPECT_EQ(output[1].dump(),
            R"({"id":"fc_resp_7f3a_1","type":"function_call","status":"completed","call_id":"call_resp_7f3a_0",)"
            R"("name":"get_weather","arguments":"{\"city\": \"Paris\"}"})");
  EXPECT_EQ(output[2].at("call_id"), "call_resp_7f3a_1");
  EXPECT_EQ(output[2].at("arguments"), "{\"city\": \"Rome\"}");
  const Rendered r = run(body, {text});
  const Types types = event_types(r.events);
  EXPECT_EQ(Types(types.begin() + 8, types.end()),
            (Types{"response.output_item.added", "response.function_call_arguments.delta",
                   "response.function_call_arguments.done", "response.output_item.done", "response.output_item.added",
                   "response.function_call_arguments.delta", "response.function_call_arguments.done",
                   "response.output_item.done", "response.completed"}));
  EXPECT_EQ(r.events[9].json_text,
            R"({"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_resp_7f3a_1",)"
            R"("output_index":1,"delta":"{\"city\": \"Paris\"}"})");
}

TEST(ResponsesRenderer, Llama3JsonToolCallsAreFunctionCallItems) {
  const std::string body = std::string(R"({"model": "llama3", "input": "Weather?", )") + kWeatherTool + "}";
  const ResponsesJson output = output_for_every_cut(
      body, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"days\": 2}}");
  ASSERT_EQ(output.size(), 2u);
  EXPECT_EQ(output[0].at("id"), "fc_resp_7f3a_0");
  EXPECT_EQ(output[0].at("arguments"), "{\"city\": \"Paris\"}");
  EXPECT_EQ(output[1].at("id"), "fc_resp_7f3a_1");
  EXPECT_EQ(output[1].at("arguments"), "{\"city\": \"Rome\", \"days\": 2}");
  // An answer is a message, and with tool_choice none a call is text.
  EXPECT_EQ(output_for_every_cut(body, "It is sunny.")[0].at("type"), "message");
  const std::string none = std::string(R"({"model": "llama3", "input": "x", "tool_choice": "none", )") + kWeatherTool + "}";
  const ResponsesJson as_text = output_for_every_cut(none, "{\"name\": \"get_weather\", \"parameters\": {}}");
  ASSERT_EQ(as_text.size(), 1u);
  EXPECT_EQ(as_text[0].at("content")[0].at("text"), "{\"name\": \"get_weather\", \"parameters\": {}}");
}

TEST(ResponsesRenderer, TextOutsideAsciiIsCutOnlyBetweenCharacters) {
  // Job events hold whole UTF-8 characters (docs/protocol.md); every such cut folds the same.
  const std::string text = "<think>\nGr\xC3\xBC\xC3\x9F\x65</think>\n\n\xE4\xB8\x96\xE7\x95\x8C \xE2\x9C\x93";
  std::vector<std::string> chars;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t length = 1;
    while (at + length < text.size() && (static_cast<unsigned char>(text[at + length]) & 0xC0) == 0x80) ++length;
    chars.push_back(text.substr(at, length));
    at += length;
  }
  const std::string body = R"({"model": "qwen3", "input": "x"})";
  const Rendered whole = run(body, {text});
  const Rendered by_char = run(body, chars);
  EXPECT_EQ(fold_stream(by_char.events), fold_stream(whole.events));
  EXPECT_EQ(by_char.object.at("output")[0].at("content")[0].at("text"), "Gr\xC3\xBC\xC3\x9F\x65");
  EXPECT_EQ(by_char.object.at("output")[1].at("content")[0].at("text"), "\xE4\xB8\x96\xE7\x95\x8C \xE2\x9C\x93");
}

TEST(ResponsesRenderer, MaxOutputTokensEndsIncomplete) {
  const Rendered r = run(R"({"model": "qwen3", "input": "x", "max_output_tokens": 3})", {"Once", " upon"}, FinishReason::kLength);
  fold_stream(r.events);
  EXPECT_EQ(r.events.back().type, "response.incomplete");
  EXPECT_EQ(r.object.at("status"), "incomplete");
  EXPECT_EQ(r.object.at("incomplete_details").dump(), R"({"reason":"max_output_tokens"})");
  EXPECT_EQ(r.object.at("output")[0].at("status"), "incomplete");
  EXPECT_EQ(r.object.at("output")[0].at("content")[0].at("text"), "Once upon");
  EXPECT_EQ(r.object.at("max_output_tokens"), 3);
  // A call cut short stays text.
  const std::string body = std::string(R"({"model": "qwen3", "input": "x", )") + kWeatherTool + "}";
  const Rendered cut = run(body, {"<tool_call>\n{\"name\": \"get_weather\", \"argu"}, FinishReason::kLength);
  fold_stream(cut.events);
  EXPECT_EQ(cut.object.at("output")[0].at("type"), "message");
}

TEST(ResponsesRenderer, FailuresCarryTheirError) {
  const struct {
    FinishReason reason;
    const char* code;
  } cases[] = {{FinishReason::kError, "server_error"},
               {FinishReason::kDeadline, "deadline_exceeded"},
               {FinishReason::kRejected, "invalid_prompt"}};
  for (const auto& c : cases) {
    const Rendered r = run(R"({"model": "qwen3", "input": "x"})", {"Partial"}, c.reason);
    fold_stream(r.events);
    EXPECT_EQ(r.events.back().type, "response.failed");
    EXPECT_EQ(r.object.at("status"), "failed");
    EXPECT_EQ(r.object.at("error").at("code"), c.code);
    EXPECT_EQ(r.object.at("output")[0].at("status"), "incomplete");
  }
  EXPECT_EQ(run(R"({"model": "qwen3", "input": "x"})", {}, FinishReason::kError).object.at("error").dump(),
            R"({"code":"server_error","message":"worker lost its device"})");
}

TEST(ResponsesRenderer, AnUnmetRequiredToolChoiceFails) {
  const std::string body = std::string(R"({"model": "qwen3", "input": "x", "tool_choice": "required", )") + kWeatherTool + "}";
  const Rendered r = run(body, {"No tools for me."});
  fold_stream(r.events);
  EXPECT_EQ(r.events.back().type, "response.failed");
  EXPECT_EQ(r.object.at("error").at("code"), "tool_choice_not_met");
  EXPECT_EQ(r.object.at("output")[0].at("status"), "completed");
  const Rendered met = run(body, {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"});
  EXPECT_EQ(met.object.at("status"), "completed");
}

TEST(ResponsesRenderer, CancelledEndsWithStatusCancelled) {
  const Rendered r = run(R"({"model": "qwen3", "input": "x", "background": true})", {"Half"}, FinishReason::kCancelled);
  fold_stream(r.events);
  EXPECT_EQ(r.events.back().type, "response.incomplete");
  EXPECT_EQ(r.object.at("status"), "cancelled");
  EXPECT_EQ(r.object.at("incomplete_details"), nullptr);
  EXPECT_EQ(r.object.at("output")[0].at("status"), "incomplete");
  // Cancelled while queued: no output at all.
  const Rendered queued = run(R"({"model": "qwen3", "input": "x", "background": true})", {}, FinishReason::kCancelled);
  EXPECT_EQ(event_types(queued.events), (Types{"response.created", "response.queued", "response.in_progress", "response.incomplete"}));
  EXPECT_EQ(queued.object.at("output"), ResponsesJson::array());
}

TEST(ResponsesRenderer, BackgroundIsQueuedUntilTheFirstEvent) {
  ResponsesRenderer renderer(settings_for(R"({"model": "qwen3", "input": "x", "background": true})"), kId, kCreatedAt);
  EXPECT_EQ(event_types(renderer.begin()), (Types{"response.created", "response.queued"}));
  EXPECT_EQ(renderer.response_object().at("status"), "queued");
  EXPECT_EQ(renderer.response_object().at("background"), true);
  const auto events = job_events(kId, {"A", "B"}, final_of(FinishReason::kStop));
  EXPECT_EQ(event_types(renderer.on_event(events[0])),
            (Types{"response.in_progress", "response.output_item.added", "response.content_part.added",
                   "response.output_text.delta"}));
  // A poll in the middle sees the text so far.
  const ResponsesJson polled = renderer.response_object();
  EXPECT_EQ(polled.at("status"), "in_progress");
  EXPECT_EQ(polled.at("output")[0].at("status"), "in_progress");
  EXPECT_EQ(polled.at("output")[0].at("content")[0].at("text"), "A");
  EXPECT_EQ(polled.at("usage"), nullptr);
  EXPECT_FALSE(renderer.finished());
  renderer.on_event(events[1]);
  EXPECT_TRUE(renderer.finished());
  EXPECT_EQ(renderer.status(), "completed");
}

TEST(ResponsesRenderer, JobEventsComeInSeqOrder) {
  ResponsesRenderer renderer(settings_for(R"({"model": "qwen3", "input": "x"})"), kId, kCreatedAt);
  renderer.begin();
  const auto events = job_events(kId, {"A", "B", "C"}, final_of(FinishReason::kStop));
  EXPECT_FALSE(renderer.on_event(events[0]).empty());
  EXPECT_TRUE(renderer.on_event(events[0]).empty());  // a replay's overlap
  EXPECT_EQ(renderer.next_job_seq(), 1);
  try {
    renderer.on_event(events[2]);
    ADD_FAILURE() << "a gap was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  }
  renderer.on_event(events[1]);
  renderer.on_event(events[2]);
  EXPECT_TRUE(renderer.on_event(events[2]).empty());
  const StreamedEvent error = renderer.error_event("replay_unavailable", "gone");
  EXPECT_EQ(error.sequence_number, renderer.next_sequence_number() - 1);
  EXPECT_EQ(error.json_text, R"({"type":"error","sequence_number":)" + std::to_string(error.sequence_number) +
                                 R"(,"code":"replay_unavailable","message":"gone","param":null})");
}

TEST(ResponsesRenderer, AFinalWithoutTheRemainingEventsEndsWithWhatWasRendered) {
  ResponsesRenderer renderer(settings_for(R"({"model": "qwen3", "input": "x", "background": true})"), kId, kCreatedAt);
  std::vector<StreamedEvent> events = renderer.begin();
  const auto job = job_events(kId, {"Kept", " lost"}, final_of(FinishReason::kStop));
  for (StreamedEvent& e : renderer.on_event(job[0])) events.push_back(std::move(e));
  for (StreamedEvent& e : renderer.on_final(*job[1].final_result)) events.push_back(std::move(e));
  fold_stream(events);
  EXPECT_EQ(events.back().type, "response.completed");
  EXPECT_EQ(renderer.response_object().at("output")[0].at("content")[0].at("text"), "Kept");
  EXPECT_TRUE(renderer.on_final(*job[1].final_result).empty());
  EXPECT_TRUE(renderer.on_event(job[1]).empty());
  // A job that ended before any event could be had.
  ResponsesRenderer bare(settings_for(R"({"model": "qwen3", "input": "x", "background": true})"), kId, kCreatedAt);
  bare.begin();
  EXPECT_EQ(event_types(bare.on_final(final_of(FinishReason::kCancelled))),
            (Types{"response.in_progress", "response.incomplete"}));
  EXPECT_EQ(bare.status(), "cancelled");
}

TEST(ResponsesRenderer, AResumedStreamIsTheTailOfTheUninterruptedOneByteForByte) {
  const std::string body = std::string(R"({"model": "qwen3", "input": "Weather?", "background": true, "stream": true, )") +
                           kWeatherTool + "}";
  const std::string text =
      "<think>\nThe user wants weather.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  ResponsesRequest request = read(body, {.created_at = kCreatedAt});
  request.job.id = kId;
  const auto events = job_events(kId, cut_every(text, 5), final_of(FinishReason::kStop));
  const Rendered first = render(request.settings, kId, kCreatedAt, events);
  fold_stream(first.events);
  // A second gateway (or this one after a restart) knows only the job.
  const ResponsesRequest recovered = recover_responses_request(request.job);
  const Rendered again = render(recovered.settings, kId, kCreatedAt, events);
  EXPECT_EQ(again.events, first.events);
  EXPECT_EQ(again.object.dump(), first.object.dump());
  // Resumed after every sequence number, mid-generation (the replay so far) and after the end.
  for (std::size_t n = 0; n < first.events.size(); ++n) {
    std::vector<StreamedEvent> tail;
    ResponsesRenderer renderer(recovered);  // id and created_at from the job
    auto keep = [&](std::vector<StreamedEvent> batch) {
      for (StreamedEvent& e : batch) {
        if (e.sequence_number > static_cast<std::int64_t>(n)) tail.push_back(std::move(e));
      }
    };
    keep(renderer.begin());
    for (const protocol::Event& event : events) keep(renderer.on_event(event));
    ASSERT_EQ(tail.size(), first.events.size() - n - 1);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), first.events.begin() + static_cast<std::ptrdiff_t>(n) + 1));
  }
}

}  // namespace
}  // namespace flashq::gateway
