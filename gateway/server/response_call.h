// One Responses API request in flight (docs/gateway.md, "The Responses API"): a response being
// created (its job submitted), or an existing one followed by its id (polled, streamed from a
// sequence number, or cancelled). Either way a ResponsesRenderer turns the job's events, from
// seq 0, into the response's typed events; a stream resumed after sequence number N sends only
// the events after N, so it continues the interrupted one with no gap and no repeat.
//
// Only a response created without `background` belongs to its connection: a client that leaves
// cancels it. A background response runs on; a follower that leaves only stops following.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "shared/http/http_server.h"
#include "gateway/openai/responses_renderer.h"
#include "gateway/openai/responses_request.h"
#include "gateway/server/broker_link.h"
#include "gateway/server/gateway_metrics.h"

namespace flashq::gateway {

class ResponseCall : public JobListener, public std::enable_shared_from_this<ResponseCall> {
 public:
  enum class Follow { kPoll, kStream, kCancel };

  // POST /v1/responses: `request.job.id` set.
  static void create(ResponsesRequest request, BrokerLink& link, GatewayMetrics& metrics,
                     std::shared_ptr<Responder> responder);
  // GET /v1/responses/{id} (kPoll, or kStream after `starting_after`), POST .../cancel (kCancel):
  // `request` recovered from the job, `status` the broker's answer about it.
  static void follow(const ResponsesRequest& request, const protocol::StatusReply& status, Follow how,
                     std::int64_t starting_after, BrokerLink& link, GatewayMetrics& metrics,
                     std::shared_ptr<Responder> responder);

  ResponseCall(const ResponsesRequest& request, BrokerLink& link, GatewayMetrics& metrics,
               std::shared_ptr<Responder> responder, std::string route);
  ~ResponseCall() override;

  void accepted() override;
  void rejected(const protocol::Rejected& reply) override;
  void event(const protocol::Event& event) override;
  void failed(const protocol::ErrorReply& error) override;
  void client_gone();

 private:
  void open_stream();
  void send(const std::vector<StreamedEvent>& events);
  void answer_object();
  void answer_error(int status_if_unsent, const std::string& code, const std::string& message);
  void end(int status);
  void settle_if_done();

  std::mutex mutex_;
  ResponsesRenderer renderer_;
  std::string id_;
  BrokerLink& link_;
  GatewayMetrics& metrics_;
  std::shared_ptr<Responder> responder_;
  std::string route_;
  bool owns_job_ = false;  // created here without background: cancelled if the client leaves
  bool stream_ = false;
  bool answer_when_accepted_ = false;                 // background without stream: the queued object at once
  std::int64_t starting_after_ = -1;                  // stream: events up to this sequence number are not sent
  std::int64_t answer_at_job_seq_ = -1;               // poll: answer once the events before this seq are in
  std::optional<protocol::FinalResult> known_final_;  // the broker's final when the follow began
  bool stream_open_ = false;
  bool done_ = false;
};

}  // namespace flashq::gateway
