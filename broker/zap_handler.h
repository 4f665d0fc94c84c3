// The broker's ZAP handler (ZeroMQ Authentication Protocol, RFC 27): libzmq asks it, over
// inproc://zeromq.zap.01 in the broker's context, whether each CURVE client may connect, and it
// answers yes only for the public keys on the allow-list. A refused client's handshake fails, so
// nothing it sends reaches the broker and nothing reaches it.
//
// It runs in a thread of its own and stops in its destructor. It must be bound before any CURVE
// socket of the context binds, and live until they are closed: libzmq lets a handshake through
// when no handler is bound at all.
#pragma once

#include <atomic>
#include <set>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace flashq {

class ZapHandler {
 public:
  // Binds the ZAP endpoint in `context` (kIo when another handler holds it) and starts serving.
  ZapHandler(zmq::context_t& context, std::set<std::string> allowed_public_keys);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

 private:
  void serve();
  void answer_one();

  std::set<std::string> allowed_;         // Z85 public keys
  std::set<std::string> refused_logged_;  // refused keys already logged at warn (clients retry often)
  zmq::socket_t socket_;                  // REP; only the serving thread touches it after construction
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashq
