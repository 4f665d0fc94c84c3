// The broker's HTTP endpoint on its own thread: /metrics (Prometheus text), /healthz (the
// process serves) and /readyz (at least one worker and not draining, else 503).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "broker/metrics.h"

namespace httplib {
class Server;
}

namespace flashq {

class HttpEndpoint {
 public:
  // `address` is host:port; port 0 picks a free one. kIo when it cannot listen.
  HttpEndpoint(const std::string& address, const BrokerMetrics& metrics);
  ~HttpEndpoint();
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace flashq
