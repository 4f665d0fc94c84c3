// One API request in flight, for every endpoint that runs jobs: its jobs submitted on a broker
// link (a chat completion's or completion's one per choice, a response's one), or one job
// followed by its id (a response polled, streamed from a sequence number, or cancelled), and
// their events turned into the answer by the API's CallRenderer (server/call_renderer.h).
//
// A streamed answer's status is known only when every job is accepted, so the stream starts then
// (frames rendered first are held); a refusal before it is an HTTP error, one after it an error
// frame that ends the stream. A whole answer is sent once the renderer says it is complete. A
// client that goes away cancels the jobs it owns (all but a background response's, which runs on
// and is followed by its id); a follower that leaves only stops following.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/openai/api_error.h"
#include "gateway/server/call_renderer.h"
#include "gateway/server/gateway_broker_link.h"
#include "gateway/server/gateway_metrics.h"
#include "shared/http/http_server.h"

namespace flashq::gateway {

struct CallOptions {
  std::string route;                  // the route /metrics counts the answer under
  bool stream = false;                // answered as server-sent events
  bool owns_jobs = true;              // a client that leaves cancels the jobs
  bool answer_when_accepted = false;  // a background response without a stream: answered at once
  bool measure_tokens = false;        // time to first token and between tokens, for /metrics
  bool name_jobs_in_errors = false;   // an error answer carries x-flashq-job-id too
};

class ApiCall : public std::enable_shared_from_this<ApiCall> {
 public:
  // Submits `jobs` (ids set, as the renderer was given them).
  static void submit(std::vector<protocol::Job> jobs, std::unique_ptr<CallRenderer> renderer, CallOptions options,
                     GatewayBrokerLink& link, GatewayMetrics& metrics, std::shared_ptr<Responder> responder);
  // Follows job `id` from seq 0; `cancel` sends CANCEL first.
  static void follow(const std::string& id, bool cancel, std::unique_ptr<CallRenderer> renderer, CallOptions options,
                     GatewayBrokerLink& link, GatewayMetrics& metrics, std::shared_ptr<Responder> responder);

  ApiCall(std::vector<std::string> ids, std::unique_ptr<CallRenderer> renderer, CallOptions options,
          GatewayBrokerLink& link, GatewayMetrics& metrics, std::shared_ptr<Responder> responder);
  ~ApiCall();

  // What the broker link says of job `job` (its index in the call).
  void accepted(std::size_t job);
  void rejected(std::size_t job, const ApiError& error);
  void event(std::size_t job, const protocol::Event& event);
  void failed(std::size_t job, const protocol::ErrorReply& error);
  void client_gone();

 private:
  void listen_for_disconnect();
  std::shared_ptr<JobListener> listener_for(std::size_t job);
  // Every job accepted: the renderer's opening, and the stream when there is one.
  void begin_answer();
  void send(const CallRenderer::Frames& frames);
  void measure_token_event();
  // The renderer says the answer is complete: the stream's end, or the whole answer.
  void settle();
  void answer_whole();
  // Ends the answer with `error`; `in_stream` when the stream already holds its frame.
  void fail(const ApiError& error, bool in_stream = false);
  void drop_jobs(bool cancel);
  void answered(int status);

  std::mutex mutex_;
  std::vector<std::string> ids_;
  std::unique_ptr<CallRenderer> renderer_;
  CallOptions options_;
  GatewayBrokerLink& link_;
  GatewayMetrics& metrics_;
  std::shared_ptr<Responder> responder_;
  std::vector<const JobListener*> listeners_;  // per job, held by the link (for forget)
  std::vector<bool> accepted_, ended_;
  std::size_t accepted_count_ = 0;
  bool stream_open_ = false;
  bool done_ = false;              // the answer ended (or the client left)
  std::vector<std::string> held_;  // frames rendered before the stream could open
  std::chrono::steady_clock::time_point arrived_, last_token_;
  bool saw_token_ = false;
};

}  // namespace flashq::gateway
