#include "shared/curve/curve_socket.h"

#include "shared/error.h"

namespace flashq {

std::optional<CurveClientKeys> load_curve_client_keys(const std::string& server_key_flag,
                                                      const std::string& secret_key_flag) {
  if (server_key_flag.empty() && secret_key_flag.empty()) return std::nullopt;
  if (server_key_flag.empty() || secret_key_flag.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "CURVE needs both --curve-server-key (the broker's public key) and --curve-secret-key (ours)");
  }
  check_curve_available();
  CurveClientKeys keys;
  keys.server_public_key = load_curve_key(server_key_flag, "--curve-server-key");
  keys.own.secret_key = load_curve_key(secret_key_flag, "--curve-secret-key");
  keys.own.public_key = curve_public_key_of(keys.own.secret_key);
  return keys;
}

void make_curve_server(zmq::socket_t& socket, const std::string& secret_key) {
  check_curve_available();
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, secret_key);
  socket.set(zmq::sockopt::zap_domain, std::string(kCurveZapDomain));
}

void make_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys) {
  check_curve_available();
  socket.set(zmq::sockopt::curve_serverkey, keys.server_public_key);
  socket.set(zmq::sockopt::curve_publickey, keys.own.public_key);
  socket.set(zmq::sockopt::curve_secretkey, keys.own.secret_key);
}

}  // namespace flashq
