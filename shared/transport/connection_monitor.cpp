#include "shared/transport/connection_monitor.h"

#include <atomic>
#include <cstring>
#include <string>
#include <zmq_addon.hpp>

#include "shared/error.h"

namespace flashq {
namespace {

// Every monitor in the process has an inproc endpoint of its own (contexts may be shared).
std::string next_monitor_endpoint() {
  static std::atomic<std::uint64_t> monitors{0};
  return "inproc://flashq-connection-monitor-" + std::to_string(monitors.fetch_add(1));
}

}  // namespace

ConnectionMonitor::ConnectionMonitor(zmq::context_t& context, zmq::socket_t& socket, int events)
    : watched_(socket), pair_(context, zmq::socket_type::pair) {
  const std::string endpoint = next_monitor_endpoint();
  if (zmq_socket_monitor(watched_.handle(), endpoint.c_str(), events) != 0) {
    throw Error(ErrorCode::kIo, std::string("zmq_socket_monitor: ") + zmq_strerror(zmq_errno()));
  }
  pair_.set(zmq::sockopt::linger, 0);
  pair_.connect(endpoint);
}

ConnectionMonitor::~ConnectionMonitor() {
  zmq_socket_monitor(watched_.handle(), nullptr, 0);  // stops the monitor; then the PAIR closes
}

std::vector<std::uint16_t> ConnectionMonitor::take_events() {
  std::vector<std::uint16_t> events;
  std::vector<zmq::message_t> parts;
  // Each event is two frames: the event number and value, then the peer's address.
  while (zmq::recv_multipart(pair_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
    std::uint16_t event = 0;
    if (!parts.empty() && parts[0].size() >= sizeof event) std::memcpy(&event, parts[0].data(), sizeof event);
    events.push_back(event);
    parts.clear();
  }
  return events;
}

}  // namespace flashq
