// The gateway: OpenAI's HTTP API over flashq's brokers (docs/gateway.md). It owns a link to each
// broker, the view of the models they serve, the metrics, and the API keys, and routes each
// request to its endpoint.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "shared/http/http_server.h"
#include "gateway/openai/api_error.h"
#include "gateway/openai/responses_request.h"
#include "gateway/server/gateway_broker_link.h"
#include "gateway/server/gateway_metrics.h"
#include "gateway/server/model_watch.h"
#include "gateway/server/routes.h"

namespace flashq::gateway {

struct GatewayOptions {
  std::vector<BrokerEndpoints> brokers;
  std::set<std::string> api_keys;       // empty: no key is asked for
  std::int64_t default_max_tokens = 0;  // 0: the job map's default
};

class Gateway {
 public:
  explicit Gateway(GatewayOptions options);
  ~Gateway();  // shutdown()s

  // Drops the broker links: requests in flight hear that the gateway is going away. Call it
  // after the HTTP server stopped and before it is destroyed, since requests hold its connections.
  void shutdown();

  // Waits up to `timeout` for the brokers' first MODELS answers.
  void wait_for_models(std::chrono::milliseconds timeout);
  // The server's handler.
  void handle(const HttpRequest& request, std::shared_ptr<Responder> responder);
  void set_server(const HttpServer* server) { server_ = server; }

  GatewayMetrics& metrics() { return metrics_; }
  ModelWatch& models() { return *watch_; }

 private:
  void route(const HttpRequest& request, const std::shared_ptr<Responder>& responder, const std::string& path,
             const RouteMatch& match);
  void check_key(const HttpRequest& request) const;
  void list_models(const std::shared_ptr<Responder>& responder);
  void generate(const HttpRequest& request, const std::shared_ptr<Responder>& responder, Route route);
  void create_response(const HttpRequest& request, const std::shared_ptr<Responder>& responder);
  // GET /v1/responses/{id} and POST /v1/responses/{id}/cancel.
  void follow_response(const HttpRequest& request, const std::shared_ptr<Responder>& responder, const std::string& id,
                       bool cancel);
  // Asks the brokers in turn (from `link`) for response `id`: `found` with the request recovered
  // from its job and the broker's status, or a 404 when none knows it.
  using ResponseFound = std::function<void(const ResponsesRequest&, const protocol::StatusReply&, GatewayBrokerLink&)>;
  void find_response(const std::string& id, std::size_t link, std::shared_ptr<Responder> responder,
                     const std::string& route, ResponseFound found);
  void answer_error(const std::shared_ptr<Responder>& responder, const std::string& route, const ApiError& error);

  GatewayOptions options_;
  std::vector<std::unique_ptr<GatewayBrokerLink>> links_;
  std::unique_ptr<ModelWatch> watch_;
  GatewayMetrics metrics_;
  const HttpServer* server_ = nullptr;
  std::int64_t started_ = 0;  // unix seconds, the models' `created`
};

}  // namespace flashq::gateway
