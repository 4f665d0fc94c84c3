// An HTTP endpoint on its own thread for a process's metrics and health: /metrics (Prometheus
// text, from `pages.metrics`), /healthz (200 while the process serves) and /readyz (200 when
// `pages.ready` says so, else 503); anything else is 404. The broker serves one on --http, a
// worker on --metrics-http; both on flashq's HTTP server (http_server.h), with one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "shared/http/http_server.h"

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
  int port() const { return server_->port(); }

 private:
  void answer(const HttpRequest& request, Responder& responder) const;

  HttpPages pages_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

}  // namespace flashq
