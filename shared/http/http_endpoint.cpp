#include "shared/http/http_endpoint.h"

#include <string_view>

#include "shared/error.h"

namespace flashq {
namespace {

HttpServerOptions listen_options(const std::string& address) {
  const size_t colon = address.rfind(':');
  const auto malformed = [&] {
    return Error(ErrorCode::kInvalidArgument, "an HTTP address is host:port, got '" + address + "'");
  };
  if (colon == std::string::npos) throw malformed();
  HttpServerOptions options;
  options.host = address.substr(0, colon);
  try {
    size_t used = 0;
    options.port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1 || options.port < 0 || options.port > 65535) throw malformed();
  } catch (const std::logic_error&) {  // stoi's invalid_argument and out_of_range
    throw malformed();
  }
  options.threads = 1;                // a scrape now and then
  options.max_body_bytes = 64 << 10;  // the pages take no body
  return options;
}

}  // namespace

HttpEndpoint::HttpEndpoint(const std::string& address, HttpPages pages) : pages_(std::move(pages)) {
  server_ = std::make_unique<HttpServer>(
      listen_options(address),
      [this](const HttpRequest& request, std::shared_ptr<Responder> responder) { answer(request, *responder); });
  thread_ = std::thread([this] { server_->run(); });
}

HttpEndpoint::~HttpEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpEndpoint::answer(const HttpRequest& request, Responder& responder) const {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  if (request.method() != boost::beast::http::verb::get) {
    responder.respond(405, "text/plain", "only GET\n", {{"Allow", "GET"}});
  } else if (path == "/metrics") {
    responder.respond(200, "text/plain; version=0.0.4", pages_.metrics());
  } else if (path == "/healthz") {
    responder.respond(200, "text/plain", "ok\n");
  } else if (path == "/readyz") {
    const bool ready = pages_.ready();
    responder.respond(ready ? 200 : 503, "text/plain", ready ? "ready\n" : "not ready\n");
  } else {
    responder.respond(404, "text/plain", "not found\n");
  }
}

}  // namespace flashq
