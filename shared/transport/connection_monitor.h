// What happens to a socket's connections, as they happen: a ZeroMQ socket monitor read through a
// PAIR socket of its own. The worker's and the gateway's links to the broker watch their DEALER
// with one, so that a broker that closed the connection (died, restarted) is noticed at once
// rather than after missed heartbeats.
#pragma once

#include <cstdint>
#include <vector>
#include <zmq.hpp>

namespace flashq {

class ConnectionMonitor {
 public:
  // Watches `socket` for `events` (ZMQ_EVENT_* bits), on `context`. Set up before the socket
  // connects, so that no event is missed; `socket` must outlive the monitor. kIo when ZeroMQ
  // refuses.
  ConnectionMonitor(zmq::context_t& context, zmq::socket_t& socket, int events);
  ~ConnectionMonitor();
  ConnectionMonitor(const ConnectionMonitor&) = delete;
  ConnectionMonitor& operator=(const ConnectionMonitor&) = delete;

  // The socket to poll for ZMQ_POLLIN: readable when an event waits.
  zmq::socket_t& events_socket() { return pair_; }

  // The events waiting (ZMQ_EVENT_* values), oldest first, at once.
  std::vector<std::uint16_t> take_events();

 private:
  zmq::socket_t& watched_;
  zmq::socket_t pair_;
};

}  // namespace flashq
