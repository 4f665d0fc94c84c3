#include "shared/transport/router_socket.h"

#include <string_view>
#include <vector>
#include <zmq_addon.hpp>

#include "shared/transport/frames.h"

namespace flashq {

void configure_router(zmq::socket_t& socket, int high_water_mark) {
  configure_socket(socket, high_water_mark);
  socket.set(zmq::sockopt::router_mandatory, 1);
}

bool send_to_peer(zmq::socket_t& router, const std::string& identity, const protocol::WireMessage& message) {
  std::vector<zmq::const_buffer> frames;
  std::vector<std::string> parts = protocol::to_frames(message);
  frames.push_back(zmq::buffer(identity));
  for (const std::string& part : parts) frames.push_back(zmq::buffer(part));
  try {
    return zmq::send_multipart(router, frames, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t&) {
    return false;  // EHOSTUNREACH: the peer is gone
  }
}

void receive_from_peers(zmq::socket_t& router, int budget, const PeerMessageHandler& on_message,
                        const PeerErrorHandler& on_error) {
  for (int received = 0; received < budget; ++received) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(router, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    const std::string identity = parts.empty() ? std::string() : parts[0].to_string();
    std::vector<std::string_view> frames;
    for (size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string_view());
    try {
      on_message(identity, protocol::from_frames(frames));
    } catch (const Error& e) {
      on_error(identity, e);
    }
  }
}

}  // namespace flashq
