#include "gateway/server/embedded_gateway.h"

#include "shared/error.h"

namespace flashq::gateway {

EmbeddedGateway::EmbeddedGateway(const std::string& address, GatewayOptions options) {
  const std::size_t colon = address.rfind(':');
  HttpServerOptions http;
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    std::size_t used = 0;
    http.port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1 || http.port < 0 || http.port > 65535) throw std::invalid_argument("port");
  } catch (const std::exception&) {
    throw Error(ErrorCode::kInvalidArgument, "a gateway address is host:port, got '" + address + "'");
  }
  http.host = address.substr(0, colon);
  gateway_ = std::make_unique<Gateway>(std::move(options));
  server_ = std::make_unique<HttpServer>(
      http, [gateway = gateway_.get()](const HttpRequest& request, std::shared_ptr<Responder> responder) {
        gateway->handle(request, std::move(responder));
      });
  gateway_->set_server(server_.get());
  thread_ = std::thread([server = server_.get()] { server->run(); });
}

EmbeddedGateway::~EmbeddedGateway() {
  server_->stop();
  thread_.join();
  gateway_->shutdown();
  server_.reset();
  gateway_.reset();
}

}  // namespace flashq::gateway
