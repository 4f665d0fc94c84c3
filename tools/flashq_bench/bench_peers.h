// What the broker and gateway benchmarks share: an in-process broker on loopback ports, ZeroMQ
// sockets that never drop (no high-water mark), wire messages sent and received as the
// protocol frames them, the steady clock in nanoseconds, and percentiles.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "broker/broker.h"
#include "shared/protocol/wire.h"

namespace flashq::bench {

using Clock = std::chrono::steady_clock;

// The steady clock in ns: what synthetic peers write into an event's text as its send time.
std::int64_t now_ns();

void send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames);

template <typename Message>
void send_message(zmq::socket_t& socket, const Message& message) {
  send_frames(socket, protocol::to_frames(protocol::to_wire(message)));
}

// The next message, or nullopt when none came within `timeout`.
std::optional<protocol::WireMessage> receive(zmq::socket_t& socket, std::chrono::milliseconds timeout);

// The p-quantile (0..1) of `values`, by the nearest rank below; 0 for none.
double percentile(std::vector<double> values, double p);

// A socket connected to `endpoint`, no linger, no high-water mark.
zmq::socket_t make_socket(zmq::context_t& context, zmq::socket_type type, const std::string& endpoint);

// A broker on its own thread, on loopback ports chosen by the system, without Redis unless
// `redis` names one (its consumer name made unique when not given), from construction to
// destruction.
struct RunningBroker {
  zmq::context_t& context;
  std::unique_ptr<Broker> broker;
  std::atomic<bool> stop{false};
  std::thread thread;

  RunningBroker(zmq::context_t& c, std::int64_t max_jobs, const RedisOptions& redis = {});
  ~RunningBroker();
};

}  // namespace flashq::bench
