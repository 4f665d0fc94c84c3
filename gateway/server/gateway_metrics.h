// The gateway's metrics, rendered in the Prometheus text format for /metrics (docs/gateway.md,
// "Operations"): requests answered by route and status, streams open now, and, from the
// gateway's side of the connection, time to first token and the time between token events.
// Recorded from any thread; a mutex between.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "shared/prometheus_text.h"

namespace flashq::gateway {

class GatewayMetrics {
 public:
  GatewayMetrics();
  void request_answered(const std::string& route, int status);
  void stream_opened();
  void stream_closed();
  // The first token event of a request, `seconds` after the request arrived.
  void first_token(double seconds);
  // A later token event, `seconds` after the request's previous one.
  void inter_token(double seconds);
  void client_dropped();  // too slow, or went away before the answer ended
  std::int64_t open_streams() const;
  std::string render(std::size_t open_connections) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> answered_;
  std::int64_t open_streams_ = 0;
  std::uint64_t dropped_ = 0;
  Histogram ttft_, inter_token_;
};

}  // namespace flashq::gateway
