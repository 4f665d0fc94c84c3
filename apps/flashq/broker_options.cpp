#include "apps/flashq/broker_options.h"

namespace flashq {

void add_broker_options(CLI::App& command, BrokerOptions& options) {
  command.add_option("--broker", options.frontend_endpoint, "broker frontend (ROUTER) endpoint")->capture_default_str();
  command.add_option("--stream-endpoint", options.stream_endpoint, "broker stream (XPUB) endpoint")
      ->capture_default_str();
  command.add_option("--timeout-ms", options.timeout_ms, "how long to wait for each broker reply")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--curve-server-key", options.curve_server_key, "KEY|FILE: the broker's CURVE public key");
  command.add_option("--curve-secret-key", options.curve_secret_key,
                     "KEY|FILE: our CURVE secret key (its public key must be on the broker's allow-list)");
}

void connect_to_broker(Client& client, const BrokerOptions& options) {
  client.connect(options.frontend_endpoint, options.stream_endpoint,
                 load_curve_client_keys(options.curve_server_key, options.curve_secret_key));
}

}  // namespace flashq
