// Whole wire messages on a test's own sockets, as the producers and workers that broker tests
// play send and receive them (docs/protocol.md: the FQ1 frames of one message).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <zmq_addon.hpp>

#include "shared/protocol/messages.h"
#include "shared/protocol/wire.h"

namespace flashq::testing {

// A DEALER to one of the broker's ROUTER sockets, as a producer or a worker connects; it drops
// unsent messages at close.
inline zmq::socket_t connect_dealer(zmq::context_t& context, const std::string& endpoint) {
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(endpoint);
  return socket;
}

template <typename Message>
void send_message(zmq::socket_t& socket, const Message& message) {
  const std::vector<std::string> frames = protocol::to_frames(protocol::to_wire(message));
  std::vector<zmq::const_buffer> buffers;
  for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
  zmq::send_multipart(socket, buffers);
}

// The next message that is not a heartbeat within `timeout`, or none. `between_polls` runs every
// 20 ms while it waits (a played worker's heartbeats, so that the broker keeps it alive).
inline std::optional<protocol::WireMessage> receive_message(zmq::socket_t& socket, std::chrono::milliseconds timeout,
                                                            const std::function<void()>& between_polls = {}) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (between_polls) between_polls();
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(20));
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> parts;
    (void)zmq::recv_multipart(socket, std::back_inserter(parts));
    std::vector<std::string_view> frames;
    for (auto& p : parts) frames.push_back(p.to_string_view());
    protocol::WireMessage message = protocol::from_frames(frames);
    if (message.type != protocol::MessageType::kHeartbeat) return message;
  }
  return std::nullopt;
}

}  // namespace flashq::testing
