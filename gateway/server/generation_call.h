// One /v1/chat/completions or /v1/completions request in flight: its jobs (one per choice)
// submitted on a broker link, their events rendered as OpenAI's chunks (streamed as server-sent
// events) or, once every choice has ended, as one response. The answer's status is known only
// when every job is accepted, so a streamed answer starts then (events that came first are held),
// and a refusal of any job is an HTTP error. A client that goes away cancels the jobs still running.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "shared/http/http_server.h"
#include "gateway/openai/api_error.h"
#include "gateway/openai/generation_request.h"
#include "gateway/server/broker_link.h"
#include "gateway/server/gateway_metrics.h"

namespace flashq::gateway {

class GenerationRenderer;

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  // `ids` one job id per choice, already written into request.jobs.
  static void start(GenerationRequest request, std::string route, BrokerLink& link, GatewayMetrics& metrics,
                    std::shared_ptr<Responder> responder);

  GenerationCall(GenerationRequest request, std::string route, BrokerLink& link, GatewayMetrics& metrics,
                 std::shared_ptr<Responder> responder);
  ~GenerationCall();

  void accepted(std::size_t choice);
  void refused(std::size_t choice, const ApiError& error);
  void event(std::size_t choice, const protocol::Event& event);
  void client_gone();

 private:
  void submit();
  void open_stream_if_ready();
  void send_data(const std::string& json_text);
  void fail(const ApiError& error);  // holds the mutex
  void cancel_running();
  void finish_request(int status);

  std::mutex mutex_;
  GenerationRequest request_;
  std::string route_;
  BrokerLink& link_;
  GatewayMetrics& metrics_;
  std::shared_ptr<Responder> responder_;
  std::unique_ptr<GenerationRenderer> renderer_;
  std::vector<std::string> ids_;
  std::vector<const JobListener*> listeners_;  // per choice, held by the link (for forget)
  std::vector<bool> accepted_, ended_;
  std::size_t accepted_count_ = 0, ended_count_ = 0;
  bool stream_open_ = false;
  bool done_ = false;              // the answer ended (or the client left)
  std::vector<std::string> held_;  // stream payloads rendered before the stream could open
  std::chrono::steady_clock::time_point arrived_, last_token_;
  bool saw_token_ = false;
};

}  // namespace flashq::gateway
