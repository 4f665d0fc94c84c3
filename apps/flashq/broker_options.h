// The flags every job command shares: where the broker is, how long to wait for its replies, and
// the CurveZMQ keys when the broker requires them.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "client/flashq_client.h"

namespace flashq {

// In a namespace of its own: broker/broker_options.h defines another flashq::BrokerOptions, and the
// flashq executable links both (`flashq up`). Two classes of one name break the One Definition
// Rule: their implicit destructors were merged and `flashq` freed garbage on exit (AddressSanitizer).
namespace cli {
struct BrokerOptions {
  std::string frontend_endpoint{kDefaultFrontendEndpoint};
  std::string stream_endpoint{kDefaultStreamEndpoint};
  int timeout_ms = kDefaultRequestTimeoutMs;  // each request/reply exchange
  std::string curve_server_key;  // KEY|FILE; with curve_secret_key, or neither
  std::string curve_secret_key;
};
}  // namespace cli
using cli::BrokerOptions;

void add_broker_options(CLI::App& command, BrokerOptions& options);

// Loads the keys (typed errors for bad ones) and connects `client` to the broker.
void connect_to_broker(Client& client, const BrokerOptions& options);

}  // namespace flashq
