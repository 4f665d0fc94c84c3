#include "shared/http_endpoint.h"

#include <httplib.h>

#include "shared/error.h"

namespace flashq {

HttpEndpoint::HttpEndpoint(const std::string& address, HttpPages pages)
    : pages_(std::move(pages)), server_(std::make_unique<httplib::Server>()) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw Error(ErrorCode::kInvalidArgument, "an HTTP address is host:port, got '" + address + "'");
  const std::string host = address.substr(0, colon);
  int requested = 0;
  try {
    requested = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    throw Error(ErrorCode::kInvalidArgument, "an HTTP address is host:port, got '" + address + "'");
  }
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(pages_.metrics(), "text/plain; version=0.0.4");
  });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& response) {
    const bool ready = pages_.ready();
    response.status = ready ? 200 : 503;
    response.set_content(ready ? "ready\n" : "not ready\n", "text/plain");
  });
  port_ = requested == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, requested) ? requested : -1);
  if (port_ <= 0) throw Error(ErrorCode::kIo, "cannot listen on " + address);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

HttpEndpoint::~HttpEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace flashq
