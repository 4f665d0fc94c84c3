// A SUB socket on the broker's stream (XPUB) socket, subscribed to one job's topic "job/<id>"
// (docs/protocol.md, "The stream"). Subscriptions are prefix matches and take a moment to reach
// the broker: events published before that are not seen (the caller notices by their seq), and
// events of other jobs whose id starts with this one ("job/ab" for "a") are dropped here.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "shared/curve/curve_socket.h"
#include "shared/protocol/producer_messages.h"

namespace flashq {

class StreamSubscriber {
 public:
  // Connects to `endpoint` and subscribes to `job_id`'s topic, over CurveZMQ when `curve` is given
  // (a broker that refuses the key sends nothing). The context is shared so that it lives as long
  // as the socket.
  StreamSubscriber(std::shared_ptr<zmq::context_t> context, const std::string& endpoint, std::string job_id,
                   const std::optional<CurveClientKeys>& curve = std::nullopt);
  // With a ZeroMQ context of its own.
  StreamSubscriber(const std::string& endpoint, std::string job_id,
                   const std::optional<CurveClientKeys>& curve = std::nullopt);

  StreamSubscriber(StreamSubscriber&&) = default;
  StreamSubscriber& operator=(StreamSubscriber&&) = default;

  const std::string& job_id() const { return job_id_; }

  // The job's next event as published, or nothing after timeout_ms without one (0: wait
  // forever). A malformed stream message is logged and skipped: the publisher is not trusted.
  std::optional<protocol::Event> next(int timeout_ms);

 private:
  std::shared_ptr<zmq::context_t> context_;  // declared first: destroyed after the socket
  zmq::socket_t socket_;
  std::string job_id_;
};

}  // namespace flashq
