// A ROUTER socket as the broker's poll loop uses its two (frontend for producers, backend for
// workers): configured so that a send never blocks, sent to one peer at a time (the identity
// frame before the message's frames, frames.h), and read by one receive loop that parses each
// message and hands it to the socket's handler.
#pragma once

#include <functional>
#include <string>
#include <zmq.hpp>

#include "shared/error.h"
#include "shared/protocol/wire.h"

namespace flashq {

// ROUTER_MANDATORY, a high-water mark both ways, no linger, and the protocol's largest frame.
void configure_router(zmq::socket_t& socket, int high_water_mark);

// Sends without waiting: false when the peer is gone or over its high-water mark, and the message
// is lost (the peer's loss is found by other means: heartbeats, a closed connection).
bool send_to_peer(zmq::socket_t& router, const std::string& identity, const protocol::WireMessage& message);
template <typename Message>
bool send_to_peer(zmq::socket_t& router, const std::string& identity, const Message& message) {
  return send_to_peer(router, identity, protocol::to_wire(message));
}

using PeerMessageHandler = std::function<void(const std::string& identity, protocol::WireMessage message)>;
using PeerErrorHandler = std::function<void(const std::string& identity, const Error& error)>;

// Takes the messages waiting on `router`, at most `budget` (the rest wait for the next turn, so a
// flood on one socket does not starve the other), never waiting for more. Each is parsed and
// handed to `on_message`; one that does not parse, or that its handler refuses by throwing Error,
// goes to `on_error` with the sender's identity.
void receive_from_peers(zmq::socket_t& router, int budget, const PeerMessageHandler& on_message,
                        const PeerErrorHandler& on_error);

}  // namespace flashq
