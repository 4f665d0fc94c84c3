#include "gateway/server/response_call.h"

#include <spdlog/spdlog.h>

#include "gateway/server/broker_answers.h"
#include "gateway/server/routes.h"
#include "shared/error.h"

namespace flashq::gateway {
namespace {

std::string sse_event(const StreamedEvent& event) {
  return "event: " + event.type + "\ndata: " + event.json_text + "\n\n";
}

std::string object_text(const ResponsesJson& object) {
  return object.dump(-1, ' ', false, ResponsesJson::error_handler_t::replace);
}

}  // namespace

ResponseCall::ResponseCall(const ResponsesRequest& request, BrokerLink& link, GatewayMetrics& metrics,
                           std::shared_ptr<Responder> responder, std::string route)
    : renderer_(request),
      id_(request.job.id),
      link_(link),
      metrics_(metrics),
      responder_(std::move(responder)),
      route_(std::move(route)) {}

ResponseCall::~ResponseCall() {
  if (stream_open_) metrics_.stream_closed();
}

void ResponseCall::create(ResponsesRequest request, BrokerLink& link, GatewayMetrics& metrics,
                          std::shared_ptr<Responder> responder) {
  auto call = std::make_shared<ResponseCall>(request, link, metrics, responder, route_label(Route::kResponses));
  call->owns_job_ = !request.background;
  call->stream_ = request.stream;
  call->answer_when_accepted_ = request.background && !request.stream;
  std::weak_ptr<ResponseCall> weak = call;
  responder->on_disconnect([weak] {
    if (auto alive = weak.lock()) alive->client_gone();
  });
  protocol::Job job = std::move(request.job);
  job.stream = true;
  link.submit(std::move(job), call);
}

void ResponseCall::follow(const ResponsesRequest& request, const protocol::StatusReply& status, Follow how,
                          std::int64_t starting_after, BrokerLink& link, GatewayMetrics& metrics,
                          std::shared_ptr<Responder> responder) {
  auto call = std::make_shared<ResponseCall>(
      request, link, metrics, responder, route_label(how == Follow::kCancel ? Route::kResponseCancel : Route::kResponse));
  call->known_final_ = status.final_result;
  std::lock_guard lock(call->mutex_);
  // The response as a client first saw it: its opening events, before any of the job's.
  const std::vector<StreamedEvent> opening = call->renderer_.begin();
  if (how == Follow::kStream) {
    call->stream_ = true;
    call->starting_after_ = starting_after;
    call->open_stream();
    call->send(opening);
  } else if (how == Follow::kPoll) {
    call->answer_at_job_seq_ = status.seq;
    if (status.seq == 0) {  // no event yet: queued
      call->answer_object();
      return;
    }
  } else {
    link.cancel(request.job.id);
  }
  std::weak_ptr<ResponseCall> weak = call;
  responder->on_disconnect([weak] {
    if (auto alive = weak.lock()) alive->client_gone();
  });
  link.watch(request.job.id, call);
}

void ResponseCall::open_stream() {
  stream_open_ = true;
  metrics_.stream_opened();
  responder_->start_stream(200, "text/event-stream", {{"x-flashq-job-id", id_}});
}

void ResponseCall::send(const std::vector<StreamedEvent>& events) {
  if (!stream_open_) return;
  for (const StreamedEvent& event : events) {
    if (event.sequence_number > starting_after_) responder_->write(sse_event(event));
  }
}

void ResponseCall::answer_object() {
  done_ = true;
  responder_->respond(200, "application/json", object_text(renderer_.response_object()), {{"x-flashq-job-id", id_}});
  metrics_.request_answered(route_, 200);
}

void ResponseCall::end(int status) {
  done_ = true;
  if (stream_open_) responder_->end();
  metrics_.request_answered(route_, status);
}

void ResponseCall::accepted() {
  std::lock_guard lock(mutex_);
  if (done_) return;
  const std::vector<StreamedEvent> opening = renderer_.begin();
  if (answer_when_accepted_) {
    answer_object();
    link_.forget(id_, this);  // it runs on; GET /v1/responses/{id} follows it
    return;
  }
  if (stream_) {
    open_stream();
    send(opening);
  }
}

void ResponseCall::rejected(const protocol::Rejected& reply) {
  std::lock_guard lock(mutex_);
  if (done_) return;
  const ApiError error = rejection_error(reply);
  done_ = true;
  HttpHeaders headers;
  if (error.retry_after_s() > 0) headers.emplace_back("Retry-After", std::to_string(error.retry_after_s()));
  responder_->respond(error.status(), "application/json", api_error_body(error), headers);
  metrics_.request_answered(route_, error.status());
}

void ResponseCall::event(const protocol::Event& event) {
  std::lock_guard lock(mutex_);
  if (done_) return;
  try {
    send(renderer_.on_event(event));
  } catch (const Error& e) {
    answer_error(500, "server_error", std::string("the response's events came out of order: ") + e.what());
    return;
  }
  settle_if_done();
}

// Whether the answer is complete now: the job ended, or a poll has every event the broker had
// published when it was asked.
void ResponseCall::settle_if_done() {
  const bool polled_enough = answer_at_job_seq_ >= 0 && renderer_.next_job_seq() >= answer_at_job_seq_;
  if (!renderer_.finished() && !polled_enough) return;
  link_.forget(id_, this);
  if (stream_) {
    end(200);
  } else {
    answer_object();
  }
}

void ResponseCall::failed(const protocol::ErrorReply& error) {
  std::lock_guard lock(mutex_);
  if (done_) return;
  if (error.code == "replay_unavailable" && known_final_) {
    // The job ended and its events are no longer kept: the response ends with what there is.
    send(renderer_.on_final(*known_final_));
    settle_if_done();
    if (!done_) answer_object();
    return;
  }
  const ApiError api = broker_error(error);
  answer_error(api.status(), api.code(), api.what());
}

void ResponseCall::answer_error(int status_if_unsent, const std::string& code, const std::string& message) {
  if (stream_open_) {
    responder_->write(sse_event(renderer_.error_event(code, message)));
    link_.forget(id_, this);
    end(200);
    return;
  }
  done_ = true;
  link_.forget(id_, this);
  const ApiError error(status_if_unsent, status_if_unsent >= 500 ? "server_error" : "invalid_request_error", code,
                       message);
  HttpHeaders headers;
  if (error.retry_after_s() > 0 || status_if_unsent == 503) headers.emplace_back("Retry-After", "1");
  responder_->respond(status_if_unsent, "application/json", api_error_body(error), headers);
  metrics_.request_answered(route_, status_if_unsent);
}

void ResponseCall::client_gone() {
  std::lock_guard lock(mutex_);
  if (done_) return;
  done_ = true;
  metrics_.client_dropped();
  if (owns_job_) link_.cancel(id_);
  link_.forget(id_, this);
  metrics_.request_answered(route_, 499);
}

}  // namespace flashq::gateway
