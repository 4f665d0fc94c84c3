// One response's job events written as the Responses API's typed stream events and as its
// response object (docs/gateway.md, "The Responses API").
//
// The rendering is a pure function of (ResponseSettings, response id, created_at, the job's
// events in seq order): no clock, no random id. Item ids are derived from the response id and
// the item's output index (rs_<id>_<i>, msg_<id>_<i>, fc_<id>_<i>), call ids from the response id
// and the call's index (call_<id>_<k>), and sequence numbers count from 0. So a stream resumed
// with starting_after=N, rendered again from seq 0 by a fresh renderer (in this gateway or in
// one restarted), is byte for byte the tail of the uninterrupted one.
//
// Events, in order:
//   begin():   response.created (status queued for a background response, else in_progress),
//              then response.queued or response.in_progress;
//   the first job event of a background response: response.in_progress;
//   per item:  response.output_item.added, then
//                reasoning: response.content_part.added (reasoning_text),
//                           response.reasoning_text.delta..., response.reasoning_text.done,
//                           response.content_part.done
//                message:   response.content_part.added (output_text),
//                           response.output_text.delta..., response.output_text.done,
//                           response.content_part.done
//                function_call: response.function_call_arguments.delta,
//                           response.function_call_arguments.done
//              then response.output_item.done;
//   the job's final: response.completed (stop), response.incomplete (length:
//              incomplete_details.reason max_output_tokens; cancelled: status cancelled, as
//              OpenAI defines no event of its own for it), or response.failed (error, deadline,
//              rejected, or a required / named tool_choice the output did not meet).
// An item is open until output of another kind starts or the job ends; an item cut by the end of
// a job that did not stop on its own is done with status incomplete.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/openai/responses_request.h"
#include "gateway/output/output_parser.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

// One SSE event: the server writes `event: <type>\ndata: <json_text>\n\n`.
struct StreamedEvent {
  std::int64_t sequence_number = 0;
  std::string type;
  std::string json_text;  // compact JSON holding type and sequence_number too
  bool operator==(const StreamedEvent&) const = default;
};

class ResponsesRenderer {
 public:
  // created_at: Unix seconds, the same for every renderer of one response.
  ResponsesRenderer(ResponseSettings settings, std::string response_id, std::int64_t created_at);
  // The renderer of a submitted request, or of one recovered from its job: the response id is
  // the job's id (set), created_at the request's.
  explicit ResponsesRenderer(const ResponsesRequest& request);
  ~ResponsesRenderer();
  ResponsesRenderer(const ResponsesRenderer&) = delete;
  ResponsesRenderer& operator=(const ResponsesRenderer&) = delete;

  // The opening events; call once, first.
  std::vector<StreamedEvent> begin();
  // The events one job event settles. Events must come in seq order from 0; one already seen
  // (seq below next_job_seq(), a replay's overlap) returns nothing; a gap throws
  // flashq::Error kInvalidArgument. Events after the final one return nothing.
  std::vector<StreamedEvent> on_event(const protocol::Event& event);
  // The job's end when its remaining events can no longer be had (STATUS_REPLY's final after
  // the broker's replay buffer dropped them, and Redis does not hold them): the response ends
  // with what was rendered. Nothing when it has already ended.
  std::vector<StreamedEvent> on_final(const protocol::FinalResult& final_result);
  // An `error` event (the stream could not go on: the broker is gone, the replay is no longer
  // kept). It takes the next sequence number; the server ends the stream after it.
  StreamedEvent error_event(std::string_view code, std::string_view message);

  // The response object as it stands: for GET, for a non-streamed answer, for the background
  // answer (queued) and inside the lifecycle events.
  ResponsesJson response_object() const;
  // queued, in_progress, completed, incomplete, failed or cancelled.
  const std::string& status() const { return status_; }
  bool finished() const { return finished_; }
  std::int64_t next_sequence_number() const { return next_sequence_; }
  std::int64_t next_job_seq() const { return next_job_seq_; }

 private:
  enum class ItemKind { kReasoning, kMessage, kFunctionCall };
  struct Item {
    ItemKind kind;
    std::string id;
    std::string text;  // reasoning, message text, or the call's arguments
    std::string call_id;
    std::string name;
    std::string status = "in_progress";
    std::vector<protocol::OutputLogprobs> logprobs;  // a message's, when the job carries them
  };

  using Events = std::vector<StreamedEvent>;
  void emit(Events& out, std::string type, ResponsesJson fields);
  void emit_lifecycle(Events& out, const std::string& type);
  ResponsesJson item_json(const Item& item, bool as_added = false) const;
  ResponsesJson part_json(const Item& item) const;
  void apply(Events& out, const OutputDeltas& deltas);
  Item& open_item(Events& out, ItemKind kind);
  void close_item(Events& out, const std::string& status);
  void finish(Events& out, const protocol::FinalResult& final_result);

  ResponseSettings settings_;
  std::string response_id_;
  std::int64_t created_at_;
  std::unique_ptr<OutputParser> parser_;
  AssistantMessage message_;  // every delta folded: judged against tool_choice at the end
  // Log-probabilities of the tokens since the last delta: the next output_text delta carries
  // them; a reasoning or tool-call delta drops them (those tokens were its own).
  std::vector<protocol::OutputLogprobs> pending_logprobs_;
  std::vector<Item> items_;
  int open_ = -1;  // index of the open item, -1 when none
  std::string status_;
  bool began_ = false;
  bool finished_ = false;
  std::int64_t next_sequence_ = 0;
  std::int64_t next_job_seq_ = 0;
  ResponsesJson error_;              // null, or {code, message}
  ResponsesJson incomplete_details_;  // null, or {reason}
  ResponsesJson usage_;              // null until the job ends
};

}  // namespace flashq::gateway
