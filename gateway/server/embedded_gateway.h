// A gateway inside another process (`flashq up`): the Gateway and its HTTP server on threads of
// their own, from construction (listening at once) to destruction.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "shared/http/http_server.h"
#include "gateway/server/gateway.h"

namespace flashq::gateway {

class EmbeddedGateway {
 public:
  // `address` is host:port (port 0: any free one). kInvalidArgument for a malformed address, kIo
  // when it cannot listen.
  EmbeddedGateway(const std::string& address, GatewayOptions options);
  ~EmbeddedGateway();
  int port() const { return server_->port(); }

 private:
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

}  // namespace flashq::gateway
