#include "gateway/server/gateway_metrics.h"

namespace flashq::gateway {

using prometheus::counter;
using prometheus::gauge;
using prometheus::line;

GatewayMetrics::GatewayMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      inter_token_({0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5}) {}

void GatewayMetrics::request_answered(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++answered_[{route, status}];
}

void GatewayMetrics::stream_opened() {
  std::lock_guard lock(mutex_);
  ++open_streams_;
}

void GatewayMetrics::stream_closed() {
  std::lock_guard lock(mutex_);
  --open_streams_;
}

void GatewayMetrics::first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void GatewayMetrics::inter_token(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_.observe(seconds);
}

void GatewayMetrics::client_dropped() {
  std::lock_guard lock(mutex_);
  ++dropped_;
}

std::int64_t GatewayMetrics::open_streams() const {
  std::lock_guard lock(mutex_);
  return open_streams_;
}

std::string GatewayMetrics::render(std::size_t open_connections) const {
  std::lock_guard lock(mutex_);
  std::string out;
  line(out, "# HELP flashq_gateway_requests_total HTTP requests answered, by route and status.");
  line(out, "# TYPE flashq_gateway_requests_total counter");
  for (const auto& [key, value] : answered_) {
    line(out, "flashq_gateway_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
                  "\"} " + std::to_string(value));
  }
  gauge(out, "flashq_gateway_open_streams", "Streamed answers (server-sent events) open now.",
        static_cast<double>(open_streams_));
  gauge(out, "flashq_gateway_open_connections", "HTTP connections open now.", static_cast<double>(open_connections));
  counter(out, "flashq_gateway_clients_dropped_total",
          "Clients that went away, or read too slowly and were dropped, before their answer ended.", dropped_);
  ttft_.render(out, "flashq_gateway_time_to_first_token_seconds",
               "From the request's arrival to its first token event, as the gateway sees it.");
  inter_token_.render(out, "flashq_gateway_inter_token_latency_seconds",
                      "Between a request's token events, as the gateway sees them.");
  return out;
}

}  // namespace flashq::gateway
