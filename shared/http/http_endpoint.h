// An HTTP endpoint on its own thread for a process's metrics and health: /metrics (Prometheus
// text, from `pages.metrics`), /healthz (200 while the process serves) and /readyz (200 when
// `pages.ready` says so, else 503). The broker serves one on --http, a worker on --metrics-http.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace flashq {

struct HttpPages {
  std::function<std::string()> metrics;  // called on the HTTP thread: must be thread-safe
  std::function<bool()> ready;
};

class HttpEndpoint {
 public:
  // `address` is host:port; port 0 picks a free one. kInvalidArgument for a malformed address,
  // kIo when it cannot listen.
  HttpEndpoint(const std::string& address, HttpPages pages);
  ~HttpEndpoint();
  int port() const { return port_; }

 private:
  HttpPages pages_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace flashq
