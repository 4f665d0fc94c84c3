// flashq-gateway: OpenAI's HTTP API (chat completions, completions, responses, models) over
// flashq's brokers (docs/gateway.md).
#include <poll.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <thread>

#include "shared/http/http_server.h"
#include "gateway/server/gateway.h"
#include "shared/cli.h"
#include "shared/error.h"
#include "shared/shutdown_signal.h"

namespace {

// One key per line; blank lines and lines starting with # are skipped.
void read_key_file(const std::string& path, std::set<std::string>& keys) {
  std::ifstream in(path);
  if (!in) throw flashq::Error(flashq::ErrorCode::kNotFound, "--api-key-file " + path + " cannot be read");
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    keys.insert(line);
  }
  if (keys.empty())
    throw flashq::Error(flashq::ErrorCode::kInvalidArgument, "--api-key-file " + path + " holds no key");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashq-gateway: OpenAI-compatible HTTP API over flashq brokers"};
  flashq::HttpServerOptions http;
  std::vector<std::string> frontends = {"tcp://127.0.0.1:5555"};
  std::vector<std::string> streams = {"tcp://127.0.0.1:5557"};
  std::vector<std::string> api_keys;
  std::string api_key_file, curve_server_key, curve_secret_key;
  std::int64_t default_max_tokens = 0;
  int wait_for_models_ms = 5000;
  app.add_option("--host", http.host, "address to listen on")->capture_default_str();
  app.add_option("--port", http.port, "port to listen on (0: any free one, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--threads", http.threads, "I/O threads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--broker", frontends, "a broker's frontend endpoint; repeat for several brokers")
      ->capture_default_str();
  app.add_option("--stream", streams, "each broker's stream endpoint, in --broker's order")->capture_default_str();
  app.add_option("--api-key", api_keys, "a key clients must send (Authorization: Bearer); repeatable");
  app.add_option("--api-key-file", api_key_file, "FILE of keys, one per line");
  app.add_option("--curve-server-key", curve_server_key, "KEY|FILE: the brokers' CURVE public key");
  app.add_option("--curve-secret-key", curve_secret_key, "KEY|FILE: this gateway's CURVE secret key");
  app.add_option("--max-body-bytes", http.max_body_bytes, "larger request bodies are answered 413")
      ->capture_default_str();
  app.add_option("--max-queued-bytes", http.max_queued_bytes,
                 "bytes queued to one client before it is dropped as too slow")
      ->capture_default_str();
  app.add_option("--default-max-tokens", default_max_tokens, "max_tokens of a request that gives none (0: 256)")
      ->capture_default_str();
  app.add_option("--wait-for-models-ms", wait_for_models_ms, "at start, how long to wait for the brokers' models")
      ->capture_default_str();
  return flashq::run_cli(app, argc, argv, [&] {
    if (streams.size() != frontends.size()) {
      throw flashq::Error(flashq::ErrorCode::kInvalidArgument, "give one --stream per --broker (" +
                                                                   std::to_string(frontends.size()) + " brokers, " +
                                                                   std::to_string(streams.size()) + " streams)");
    }
    flashq::gateway::GatewayOptions options;
    options.default_max_tokens = default_max_tokens;
    const auto curve = flashq::load_curve_client_keys(curve_server_key, curve_secret_key);
    for (std::size_t i = 0; i < frontends.size(); ++i) options.brokers.push_back({frontends[i], streams[i], curve});
    options.api_keys.insert(api_keys.begin(), api_keys.end());
    if (!api_key_file.empty()) read_key_file(api_key_file, options.api_keys);

    const int shutdown_fd = flashq::install_shutdown_signals();
    flashq::gateway::Gateway gateway(std::move(options));
    flashq::HttpServer server(
        http, [&gateway](const auto& request, auto responder) { gateway.handle(request, std::move(responder)); });
    gateway.set_server(&server);
    gateway.wait_for_models(std::chrono::milliseconds(wait_for_models_ms));
    std::thread stopper([&server, shutdown_fd] {
      pollfd signalled{shutdown_fd, POLLIN, 0};  // the eventfd is non-blocking: wait for it to be readable
      while (poll(&signalled, 1, -1) <= 0) {
      }
      server.stop();
    });
    stopper.detach();
    spdlog::info("gateway: listening on http://{}:{} ({} broker{}, {} models served, API keys {})", http.host,
                 server.port(), frontends.size(), frontends.size() == 1 ? "" : "s",
                 gateway.models().directory()->size(), api_keys.empty() && api_key_file.empty() ? "off" : "on");
    server.run();
    gateway.shutdown();
    spdlog::info("gateway: stopped");
  });
}
