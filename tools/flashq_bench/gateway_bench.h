// `flashq-bench gateway`: the HTTP gateway in one process with an in-process broker, synthetic
// streaming workers and raw-socket HTTP clients (no model runs). Reports the memory that open
// SSE streams cost the gateway, the token events per second it delivers as SSE, and the latency
// it adds to a token event against a ZeroMQ subscriber on the broker's stream in the same run.
#pragma once

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_gateway_bench(CLI::App& app);

}  // namespace flashq
