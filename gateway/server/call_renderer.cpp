// The renderers of chat completions, completions and responses, as a call drives them.
#include "gateway/server/call_renderer.h"

#include "gateway/openai/chat_completion_stream.h"
#include "gateway/openai/completion_stream.h"
#include "gateway/openai/responses_renderer.h"
#include "shared/error.h"

namespace flashq::gateway {
namespace {

std::string sse_data(const std::string& json_text) { return "data: " + json_text + "\n\n"; }

// Chat completions and completions: `data:` frames, `[DONE]` after the last, one job per
// choice; a failed choice fails the answer.
template <typename Renderer>
class GenerationCallRenderer : public CallRenderer {
 public:
  GenerationCallRenderer(const GenerationRequest& request, std::vector<std::string> job_ids, std::int64_t created)
      : renderer_(request, std::move(job_ids), created) {}

  Frames open() override { return {}; }
  Frames on_event(std::size_t job, const protocol::Event& event) override {
    Frames frames;
    for (const std::string& payload : renderer_.on_event(job, event)) frames.push_back(sse_data(payload));
    return frames;
  }
  std::optional<Frames> on_events_lost(const protocol::ErrorReply&) override { return std::nullopt; }
  std::optional<ApiError> failure() const override { return renderer_.failure(); }
  bool complete() const override { return renderer_.choices().all_finished(); }
  Frames close() override {
    Frames frames;
    for (const std::string& payload : renderer_.finish()) frames.push_back(sse_data(payload));
    frames.push_back("data: [DONE]\n\n");
    return frames;
  }
  std::string body() override { return renderer_.response(); }
  std::string error_frame(const ApiError& error) override { return sse_data(api_error_body(error)); }

 private:
  Renderer renderer_;
};

// A response: typed `event:` frames, from seq 0 but sent only after `starting_after`; a stream
// that cannot go on ends with an `error` event.
class ResponseCallRenderer : public CallRenderer {
 public:
  ResponseCallRenderer(const ResponsesRequest& request, ResponseView view)
      : renderer_(request), view_(std::move(view)) {}

  Frames open() override { return frames_of(renderer_.begin()); }
  Frames on_event(std::size_t, const protocol::Event& event) override {
    try {
      return frames_of(renderer_.on_event(event));
    } catch (const Error& e) {
      throw ApiError(500, "server_error", "server_error",
                     std::string("the response's events came out of order: ") + e.what());
    }
  }
  std::optional<Frames> on_events_lost(const protocol::ErrorReply& error) override {
    // The job ended and its events are no longer kept: the response ends with what there is.
    if (error.code != "replay_unavailable" || !view_.known_final) return std::nullopt;
    return frames_of(renderer_.on_final(*view_.known_final));
  }
  std::optional<ApiError> failure() const override { return std::nullopt; }  // a failed response is an answer
  bool complete() const override {
    return renderer_.finished() ||
           (view_.answer_at_job_seq >= 0 && renderer_.next_job_seq() >= view_.answer_at_job_seq);
  }
  Frames close() override { return {}; }
  std::string body() override {
    return renderer_.response_object().dump(-1, ' ', false, ResponsesJson::error_handler_t::replace);
  }
  std::string error_frame(const ApiError& error) override {
    return frame(renderer_.error_event(error.code(), error.what()));
  }

 private:
  static std::string frame(const StreamedEvent& event) {
    return "event: " + event.type + "\ndata: " + event.json_text + "\n\n";
  }
  Frames frames_of(const std::vector<StreamedEvent>& events) const {
    Frames frames;
    for (const StreamedEvent& event : events) {
      if (event.sequence_number > view_.starting_after) frames.push_back(frame(event));
    }
    return frames;
  }

  ResponsesRenderer renderer_;
  ResponseView view_;
};

}  // namespace

std::unique_ptr<CallRenderer> generation_renderer(const GenerationRequest& request, std::vector<std::string> job_ids,
                                                  std::int64_t created) {
  if (request.endpoint == Endpoint::kChatCompletions) {
    return std::make_unique<GenerationCallRenderer<ChatCompletionRenderer>>(request, std::move(job_ids), created);
  }
  return std::make_unique<GenerationCallRenderer<CompletionRenderer>>(request, std::move(job_ids), created);
}

std::unique_ptr<CallRenderer> response_renderer(const ResponsesRequest& request, ResponseView view) {
  return std::make_unique<ResponseCallRenderer>(request, std::move(view));
}

}  // namespace flashq::gateway
