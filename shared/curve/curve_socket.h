// Turning a ZeroMQ socket into a CURVE server or client (CurveZMQ, RFC 26). Options must be set
// before the socket binds or connects; a peer whose handshake fails never gets a message through,
// in either direction (ZeroMQ drops the connection and the client retries quietly).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "shared/curve/curve_keys.h"

namespace flashq {

// The ZAP domain of flashq's CURVE servers; the broker's ZAP handler serves only this one.
inline constexpr std::string_view kCurveZapDomain = "flashq";

// What a client (producer, subscriber, worker) needs: the server's public key and a pair of its own.
struct CurveClientKeys {
  std::string server_public_key;  // Z85
  CurveKeyPair own;
};

// From a client's --curve-server-key and --curve-secret-key (KEY|FILE each; the public key is
// derived): nothing when both are empty (plain TCP); kInvalidArgument when only one is given.
std::optional<CurveClientKeys> load_curve_client_keys(const std::string& server_key_flag,
                                                      const std::string& secret_key_flag);

// CURVE server with `secret_key`; every handshake goes to the ZAP handler of the socket's
// context under kCurveZapDomain.
void make_curve_server(zmq::socket_t& socket, const std::string& secret_key);

void make_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys);

}  // namespace flashq
