#include "client/cli/broker_options.h"

namespace flashq {

void add_broker_options(CLI::App& command, BrokerOptions& options) {
  command.add_option("--broker", options.frontend_endpoint, "broker frontend (ROUTER) endpoint")->capture_default_str();
  command.add_option("--stream-endpoint", options.stream_endpoint, "broker stream (XPUB) endpoint")
      ->capture_default_str();
  command.add_option("--timeout-ms", options.timeout_ms, "how long to wait for each broker reply")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace flashq
