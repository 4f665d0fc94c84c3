#include "gateway/server/generation_call.h"

#include <spdlog/spdlog.h>

#include "gateway/openai/chat_completion_stream.h"
#include "gateway/openai/completion_stream.h"
#include "gateway/server/broker_answers.h"
#include "gateway/server/job_ids.h"

namespace flashq::gateway {

// The renderer of either endpoint, as the call drives it.
class GenerationRenderer {
 public:
  virtual ~GenerationRenderer() = default;
  virtual std::vector<std::string> on_event(std::size_t choice, const protocol::Event& event) = 0;
  virtual std::vector<std::string> finish() = 0;
  virtual std::string response() = 0;
  // Set once a job ended without a completion: on_event returned its error payload.
  virtual const std::optional<ApiError>& failure() const = 0;
};

namespace {

template <typename Renderer>
class RendererOf : public GenerationRenderer {
 public:
  template <typename... Args>
  explicit RendererOf(Args&&... args) : renderer_(std::forward<Args>(args)...) {}
  std::vector<std::string> on_event(std::size_t choice, const protocol::Event& event) override {
    return renderer_.on_event(choice, event);
  }
  std::vector<std::string> finish() override { return renderer_.finish(); }
  std::string response() override { return renderer_.response(); }
  const std::optional<ApiError>& failure() const override { return renderer_.failure(); }

 private:
  Renderer renderer_;
};

// One choice's job, as the broker link reports it.
class ChoiceListener : public JobListener {
 public:
  ChoiceListener(std::shared_ptr<GenerationCall> call, std::size_t choice) : call_(std::move(call)), choice_(choice) {}
  void accepted() override { call_->accepted(choice_); }
  void rejected(const protocol::Rejected& reply) override { call_->refused(choice_, rejection_error(reply)); }
  void event(const protocol::Event& event) override { call_->event(choice_, event); }
  void failed(const protocol::ErrorReply& error) override { call_->refused(choice_, broker_error(error)); }

 private:
  std::shared_ptr<GenerationCall> call_;
  std::size_t choice_;
};

std::string sse_data(const std::string& json_text) { return "data: " + json_text + "\n\n"; }

std::string joined(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

}  // namespace

void GenerationCall::start(GenerationRequest request, std::string route, BrokerLink& link, GatewayMetrics& metrics,
                           std::shared_ptr<Responder> responder) {
  auto call = std::make_shared<GenerationCall>(std::move(request), std::move(route), link, metrics, responder);
  std::weak_ptr<GenerationCall> weak = call;
  responder->on_disconnect([weak] {
    if (auto alive = weak.lock()) alive->client_gone();
  });
  call->submit();
}

GenerationCall::GenerationCall(GenerationRequest request, std::string route, BrokerLink& link, GatewayMetrics& metrics,
                               std::shared_ptr<Responder> responder)
    : request_(std::move(request)),
      route_(std::move(route)),
      link_(link),
      metrics_(metrics),
      responder_(std::move(responder)),
      accepted_(request_.jobs.size(), false),
      ended_(request_.jobs.size(), false),
      arrived_(std::chrono::steady_clock::now()) {
  const std::string prefix = request_.endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-";
  for (protocol::Job& job : request_.jobs) {
    job.id = new_job_id(prefix);
    job.stream = true;
    ids_.push_back(job.id);
  }
  const std::int64_t created = unix_seconds_now();
  if (request_.endpoint == Endpoint::kChatCompletions) {
    renderer_ = std::make_unique<RendererOf<ChatCompletionRenderer>>(request_, ids_, created);
  } else {
    renderer_ = std::make_unique<RendererOf<CompletionRenderer>>(request_, ids_, created);
  }
}

GenerationCall::~GenerationCall() {
  if (stream_open_) metrics_.stream_closed();
}

void GenerationCall::submit() {
  // Under the lock: a choice's answer may come before the last job is sent.
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<ChoiceListener>> listeners;
  for (std::size_t i = 0; i < request_.jobs.size(); ++i) {
    listeners.push_back(std::make_shared<ChoiceListener>(shared_from_this(), i));
    listeners_.push_back(listeners.back().get());
  }
  for (std::size_t i = 0; i < request_.jobs.size(); ++i) link_.submit(request_.jobs[i], std::move(listeners[i]));
}

void GenerationCall::accepted(std::size_t choice) {
  std::lock_guard lock(mutex_);
  if (done_ || accepted_[choice]) return;
  accepted_[choice] = true;
  ++accepted_count_;
  open_stream_if_ready();
}

void GenerationCall::open_stream_if_ready() {
  if (!request_.stream || stream_open_ || accepted_count_ < ids_.size()) return;
  stream_open_ = true;
  metrics_.stream_opened();
  responder_->start_stream(200, "text/event-stream", {{"x-flashq-job-id", joined(ids_)}});
  for (const std::string& payload : held_) responder_->write(sse_data(payload));
  held_.clear();
}

void GenerationCall::send_data(const std::string& json_text) {
  if (stream_open_) {
    responder_->write(sse_data(json_text));
  } else {
    held_.push_back(json_text);
  }
}

void GenerationCall::refused(std::size_t choice, const ApiError& error) {
  std::lock_guard lock(mutex_);
  if (done_ || ended_[choice]) return;
  ended_[choice] = true;
  fail(error);
}

void GenerationCall::fail(const ApiError& error) {
  done_ = true;
  cancel_running();
  if (stream_open_) {
    // The status was sent: the error travels as a payload of its own, as OpenAI streams one.
    responder_->write(sse_data(api_error_body(error)));
    responder_->end();
    finish_request(200);
    return;
  }
  HttpHeaders headers = {{"x-flashq-job-id", joined(ids_)}};
  if (error.retry_after_s() > 0) headers.emplace_back("Retry-After", std::to_string(error.retry_after_s()));
  responder_->respond(error.status(), "application/json", api_error_body(error), headers);
  finish_request(error.status());
}

void GenerationCall::event(std::size_t choice, const protocol::Event& event) {
  std::lock_guard lock(mutex_);
  if (done_ || ended_[choice]) return;
  if (!event.token_ids.empty()) {
    const auto now = std::chrono::steady_clock::now();
    if (!saw_token_) {
      metrics_.first_token(std::chrono::duration<double>(now - arrived_).count());
    } else {
      metrics_.inter_token(std::chrono::duration<double>(now - last_token_).count());
    }
    saw_token_ = true;
    last_token_ = now;
  }
  try {
    for (const std::string& payload : renderer_->on_event(choice, event)) {
      if (request_.stream) send_data(payload);
    }
    if (const auto& failure = renderer_->failure()) {
      // The stream holds the error payload already; a whole response answers with its status.
      ended_[choice] = true;
      done_ = true;
      cancel_running();
      if (request_.stream && stream_open_) {
        responder_->end();
        finish_request(200);
      } else {
        fail(*failure);
      }
      return;
    }
    if (!event.final_result) return;
    ended_[choice] = true;
    if (++ended_count_ < ids_.size()) return;
    done_ = true;
    if (request_.stream) {
      for (const std::string& payload : renderer_->finish()) send_data(payload);
      open_stream_if_ready();
      responder_->write("data: [DONE]\n\n");
      responder_->end();
      finish_request(200);
    } else {
      responder_->respond(200, "application/json", renderer_->response(), {{"x-flashq-job-id", joined(ids_)}});
      finish_request(200);
    }
  } catch (const ApiError& error) {
    ended_[choice] = true;
    fail(error);
  }
}

void GenerationCall::client_gone() {
  std::lock_guard lock(mutex_);
  if (done_) return;
  done_ = true;
  metrics_.client_dropped();
  cancel_running();
  finish_request(499);  // nginx's "client closed request": no answer was sent
}

void GenerationCall::cancel_running() {
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    if (ended_[i]) continue;
    link_.cancel(ids_[i]);
    link_.forget(ids_[i], listeners_[i]);
  }
}

void GenerationCall::finish_request(int status) { metrics_.request_answered(route_, status); }

}  // namespace flashq::gateway
