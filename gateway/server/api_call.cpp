// A request's jobs, from submission or a follow to the answer's end.
#include "gateway/server/api_call.h"

#include "gateway/server/broker_answers.h"

namespace flashq::gateway {
namespace {

// One job of a call, as the broker link reports it.
class CallJobListener : public JobListener {
 public:
  CallJobListener(std::shared_ptr<ApiCall> call, std::size_t job) : call_(std::move(call)), job_(job) {}
  void accepted() override { call_->accepted(job_); }
  void rejected(const protocol::Rejected& reply) override { call_->rejected(job_, rejection_error(reply)); }
  void event(const protocol::Event& event) override { call_->event(job_, event); }
  void failed(const protocol::ErrorReply& error) override { call_->failed(job_, error); }

 private:
  std::shared_ptr<ApiCall> call_;
  std::size_t job_;
};

std::string joined(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

}  // namespace

void ApiCall::submit(std::vector<protocol::Job> jobs, std::unique_ptr<CallRenderer> renderer, CallOptions options,
                     GatewayBrokerLink& link, GatewayMetrics& metrics, std::shared_ptr<Responder> responder) {
  std::vector<std::string> ids;
  for (const protocol::Job& job : jobs) ids.push_back(job.id);
  auto call = std::make_shared<ApiCall>(std::move(ids), std::move(renderer), std::move(options), link, metrics,
                                        std::move(responder));
  call->listen_for_disconnect();
  // Under the lock: a job's answer may come before the last job is sent.
  std::lock_guard lock(call->mutex_);
  std::vector<std::shared_ptr<JobListener>> listeners;
  for (std::size_t i = 0; i < jobs.size(); ++i) listeners.push_back(call->listener_for(i));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].stream = true;
    link.submit(std::move(jobs[i]), std::move(listeners[i]));
  }
}

void ApiCall::follow(const std::string& id, bool cancel, std::unique_ptr<CallRenderer> renderer, CallOptions options,
                     GatewayBrokerLink& link, GatewayMetrics& metrics, std::shared_ptr<Responder> responder) {
  auto call = std::make_shared<ApiCall>(std::vector<std::string>{id}, std::move(renderer), std::move(options), link,
                                        metrics, std::move(responder));
  std::lock_guard lock(call->mutex_);
  std::shared_ptr<JobListener> listener = call->listener_for(0);
  // A followed job was accepted long ago: the answer begins at once, as a client first saw it.
  call->accepted_[0] = true;
  call->accepted_count_ = 1;
  call->begin_answer();
  if (call->renderer_->complete()) {  // a poll of a response with no event yet
    call->settle();
    return;
  }
  if (cancel) link.cancel(id);
  call->listen_for_disconnect();
  link.watch(id, std::move(listener));
}

ApiCall::ApiCall(std::vector<std::string> ids, std::unique_ptr<CallRenderer> renderer, CallOptions options,
                 GatewayBrokerLink& link, GatewayMetrics& metrics, std::shared_ptr<Responder> responder)
    : ids_(std::move(ids)),
      renderer_(std::move(renderer)),
      options_(std::move(options)),
      link_(link),
      metrics_(metrics),
      responder_(std::move(responder)),
      accepted_(ids_.size(), false),
      ended_(ids_.size(), false),
      arrived_(std::chrono::steady_clock::now()) {}

ApiCall::~ApiCall() {
  if (stream_open_) metrics_.stream_closed();
}

void ApiCall::listen_for_disconnect() {
  std::weak_ptr<ApiCall> weak = shared_from_this();
  responder_->on_disconnect([weak] {
    if (auto alive = weak.lock()) alive->client_gone();
  });
}

std::shared_ptr<JobListener> ApiCall::listener_for(std::size_t job) {
  auto listener = std::make_shared<CallJobListener>(shared_from_this(), job);
  listeners_.push_back(listener.get());
  return listener;
}

void ApiCall::accepted(std::size_t job) {
  std::lock_guard lock(mutex_);
  if (done_ || accepted_[job]) return;
  accepted_[job] = true;
  if (++accepted_count_ < ids_.size()) return;
  if (options_.answer_when_accepted) {
    renderer_->open();
    answer_whole();
    drop_jobs(/*cancel=*/false);  // it runs on; GET /v1/responses/{id} follows it
    return;
  }
  begin_answer();
}

void ApiCall::begin_answer() {
  const CallRenderer::Frames opening = renderer_->open();
  if (!options_.stream) return;
  stream_open_ = true;
  metrics_.stream_opened();
  responder_->start_stream(200, "text/event-stream", {{"x-flashq-job-id", joined(ids_)}});
  for (const std::string& frame : opening) responder_->write(frame);
  for (const std::string& frame : held_) responder_->write(frame);
  held_.clear();
}

void ApiCall::send(const CallRenderer::Frames& frames) {
  for (const std::string& frame : frames) {
    if (stream_open_) {
      responder_->write(frame);
    } else {
      held_.push_back(frame);
    }
  }
}

void ApiCall::rejected(std::size_t job, const ApiError& error) {
  std::lock_guard lock(mutex_);
  if (done_ || ended_[job]) return;
  ended_[job] = true;
  fail(error);
}

void ApiCall::event(std::size_t job, const protocol::Event& event) {
  std::lock_guard lock(mutex_);
  if (done_ || ended_[job]) return;
  if (options_.measure_tokens && !event.token_ids.empty()) measure_token_event();
  try {
    const CallRenderer::Frames frames = renderer_->on_event(job, event);
    if (options_.stream) send(frames);
    if (const std::optional<ApiError> failure = renderer_->failure()) {
      ended_[job] = true;
      fail(*failure, /*in_stream=*/true);
      return;
    }
    if (event.final_result) ended_[job] = true;
    if (renderer_->complete()) settle();
  } catch (const ApiError& error) {
    ended_[job] = true;
    fail(error);
  }
}

void ApiCall::failed(std::size_t job, const protocol::ErrorReply& error) {
  std::lock_guard lock(mutex_);
  if (done_ || ended_[job]) return;
  if (const std::optional<CallRenderer::Frames> frames = renderer_->on_events_lost(error)) {
    if (options_.stream) send(*frames);
    settle();
    return;
  }
  ended_[job] = true;
  fail(broker_error(error));
}

void ApiCall::client_gone() {
  std::lock_guard lock(mutex_);
  if (done_) return;
  done_ = true;
  metrics_.client_dropped();
  drop_jobs(/*cancel=*/options_.owns_jobs);
  answered(499);  // nginx's "client closed request": no answer was sent
}

void ApiCall::measure_token_event() {
  const auto now = std::chrono::steady_clock::now();
  if (!saw_token_) {
    metrics_.first_token(std::chrono::duration<double>(now - arrived_).count());
  } else {
    metrics_.inter_token(std::chrono::duration<double>(now - last_token_).count());
  }
  saw_token_ = true;
  last_token_ = now;
}

void ApiCall::settle() {
  done_ = true;
  drop_jobs(/*cancel=*/false);
  if (!options_.stream) {
    answer_whole();
    return;
  }
  send(renderer_->close());
  if (stream_open_) responder_->end();
  answered(200);
}

void ApiCall::answer_whole() {
  done_ = true;
  responder_->respond(200, "application/json", renderer_->body(), {{"x-flashq-job-id", joined(ids_)}});
  answered(200);
}

void ApiCall::fail(const ApiError& error, bool in_stream) {
  done_ = true;
  drop_jobs(/*cancel=*/true);  // the other choices' jobs: the answer is over
  if (stream_open_) {
    // The status was sent: the error travels as a frame of its own, as OpenAI streams one.
    if (!in_stream) responder_->write(renderer_->error_frame(error));
    responder_->end();
    answered(200);
    return;
  }
  HttpHeaders headers;
  if (options_.name_jobs_in_errors) headers.emplace_back("x-flashq-job-id", joined(ids_));
  if (error.retry_after_s() > 0) headers.emplace_back("Retry-After", std::to_string(error.retry_after_s()));
  responder_->respond(error.status(), "application/json", api_error_body(error), headers);
  answered(error.status());
}

// Cancels (when asked) the jobs still running, and stops hearing about every job.
void ApiCall::drop_jobs(bool cancel) {
  for (std::size_t i = 0; i < ids_.size() && i < listeners_.size(); ++i) {
    if (cancel && !ended_[i]) link_.cancel(ids_[i]);
    link_.forget(ids_[i], listeners_[i]);
  }
}

void ApiCall::answered(int status) { metrics_.request_answered(options_.route, status); }

}  // namespace flashq::gateway
