// What one API makes of a call's jobs (server/api_call.h): the server-sent-event frames of a
// streamed answer and the body of a whole one, from the jobs' events. One renderer per API:
// chat completions and completions (gateway/openai/chat_completion_stream.h,
// completion_stream.h: one job per choice) and the Responses API
// (gateway/openai/responses_renderer.h: one job per response, created or followed by its id).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/openai/api_error.h"
#include "gateway/openai/generation_request.h"
#include "gateway/openai/responses_request.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {

class CallRenderer {
 public:
  using Frames = std::vector<std::string>;  // SSE frames, each written as it is

  virtual ~CallRenderer() = default;

  // Once every job is accepted (or, for a followed job, at once): the stream's first frames.
  // Called once, before any event.
  virtual Frames open() = 0;
  // The frames job `job`'s event adds (a whole answer sends none). Throws ApiError when the
  // events cannot be rendered.
  virtual Frames on_event(std::size_t job, const protocol::Event& event) = 0;
  // The broker can no longer give the jobs' events (its ERROR): the frames that end the answer
  // with what was rendered, or nullopt when the answer cannot end so and the error is answered.
  virtual std::optional<Frames> on_events_lost(const protocol::ErrorReply& error) = 0;
  // A job that ended without a completion ends the answer: set from then on, its error frame
  // already among on_event's frames.
  virtual std::optional<ApiError> failure() const = 0;
  // The answer is whole: every job ended, or a poll holds every event it asked for.
  virtual bool complete() const = 0;
  // A complete stream's last frames.
  virtual Frames close() = 0;
  // The whole answer's JSON text.
  virtual std::string body() = 0;
  // The frame that ends an open stream with `error`.
  virtual std::string error_frame(const ApiError& error) = 0;
};

// /v1/chat/completions or /v1/completions, by request.endpoint. `job_ids`: one per choice, in
// choice order; `created`: Unix seconds.
std::unique_ptr<CallRenderer> generation_renderer(const GenerationRequest& request, std::vector<std::string> job_ids,
                                                  std::int64_t created);

// How much of a response an answer shows.
struct ResponseView {
  std::int64_t starting_after = -1;                  // stream: events up to this sequence number are not sent
  std::int64_t answer_at_job_seq = -1;               // poll: complete once the job's events before this seq are in
  std::optional<protocol::FinalResult> known_final;  // the broker's final when the follow began
};

// /v1/responses: the response `request.job.id`, created or recovered from its job.
std::unique_ptr<CallRenderer> response_renderer(const ResponsesRequest& request, ResponseView view = {});

}  // namespace flashq::gateway
