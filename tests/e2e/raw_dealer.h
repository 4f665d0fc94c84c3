// A raw DEALER on a broker socket, so a test can send frames no client library would, or play a
// worker by hand. Replies are decoded as protocol messages (the broker is trusted to speak it).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "shared/protocol/messages.h"
#include "shared/protocol/wire.h"

namespace flashq::testing {

class RawDealer {
 public:
  RawDealer(zmq::context_t& context, const std::string& endpoint) : socket_(context, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }

  void send(const std::vector<std::string>& frames, zmq::send_flags flags = zmq::send_flags::none) {
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    (void)zmq::send_multipart(socket_, buffers, flags);
  }
  template <typename Message>
  void send_message(const Message& message) {
    send(protocol::to_frames(protocol::to_wire(message)));
  }

  // While waiting in next(), send a worker's HEARTBEAT every 100 ms (a live fake worker).
  void keep_alive(bool on) { keep_alive_ = on; }

  // The next message that is not a HEARTBEAT; nothing after `timeout`.
  std::optional<protocol::WireMessage> next(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    return receive(timeout, false);
  }

  // Whether a HEARTBEAT arrives within `timeout` (the broker beats only to workers it registered);
  // other messages meanwhile are dropped.
  bool wait_heartbeat(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      std::optional<protocol::WireMessage> m = receive(left, true);
      if (m && m->type == protocol::MessageType::kHeartbeat) return true;
    }
    return false;
  }

 private:
  std::optional<protocol::WireMessage> receive(std::chrono::milliseconds timeout, bool heartbeats) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (keep_alive_ && std::chrono::steady_clock::now() - last_beat_ >= std::chrono::milliseconds(100)) {
        last_beat_ = std::chrono::steady_clock::now();
        send_message(protocol::WorkerHeartbeat{.load = 1});
      }
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(socket_, std::back_inserter(parts))) continue;
      std::vector<std::string_view> frames;
      for (const zmq::message_t& p : parts) frames.push_back(p.to_string_view());
      protocol::WireMessage message = protocol::from_frames(frames);
      if (heartbeats || message.type != protocol::MessageType::kHeartbeat) return message;
    }
    return std::nullopt;
  }

  zmq::socket_t socket_;
  bool keep_alive_ = false;
  std::chrono::steady_clock::time_point last_beat_;
};

}  // namespace flashq::testing
