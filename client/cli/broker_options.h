// The flags every job command shares: where the broker is and how long to wait for its replies.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "client/flashq_client.h"

namespace flashq {

struct BrokerOptions {
  std::string frontend_endpoint{kDefaultFrontendEndpoint};
  std::string stream_endpoint{kDefaultStreamEndpoint};
  int timeout_ms = kDefaultRequestTimeoutMs;  // each request/reply exchange
};

void add_broker_options(CLI::App& command, BrokerOptions& options);

}  // namespace flashq
