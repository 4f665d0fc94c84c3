// A worker played by a test at the wire level (docs/protocol.md, "Worker messages"): a DEALER on
// the broker's backend that sends READY with the slots it advertises, answers nothing on its own,
// and reports the ASSIGNs it is sent. It never runs a job: the test ends each one with FINAL.
// Heartbeats both ways are the caller's to pump (beat()), so that several workers waited on in
// turn all stay alive.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "shared/protocol/wire.h"
#include "shared/protocol/worker_messages.h"

namespace flashq::testing {

class SyntheticWorker {
 public:
  SyntheticWorker(zmq::context_t& context, const std::string& backend, std::string name, int64_t slots)
      : name_(std::move(name)), socket_(context, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(backend);
    send(protocol::Ready{.worker_id = name_, .model = "tiny", .slots = slots, .backend = "cpu"});
  }

  const std::string& name() const { return name_; }
  // The jobs assigned to this worker and not yet ended with finish().
  const std::set<std::string>& held() const { return held_; }
  // True once the broker has sent this worker a heartbeat: it beats registered workers only.
  bool registered() const { return registered_; }

  // A heartbeat reporting `load` jobs running (by default, the ones held).
  void beat(std::optional<int64_t> load = std::nullopt) {
    send(protocol::WorkerHeartbeat{.load = load.value_or(static_cast<int64_t>(held_.size()))});
  }

  // Ends an attempt the way a worker that ran it to max_tokens would, freeing its slot.
  void finish(const protocol::Assign& assign) {
    held_.erase(assign.job.id);
    send(protocol::Final{.id = assign.job.id,
                         .attempt = assign.attempt,
                         .result = {.finish_reason = protocol::FinishReason::kLength}});
  }

  // Reads what has arrived, without waiting: heartbeats mark the worker registered, ASSIGNs are
  // queued for take_assign(), anything else is kept in unexpected().
  void drain() {
    std::vector<zmq::message_t> parts;
    while (zmq::recv_multipart(socket_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
      std::vector<std::string_view> frames;
      for (const zmq::message_t& part : parts) frames.push_back(part.to_string_view());
      const protocol::WireMessage message = protocol::from_frames(frames);
      if (message.type == protocol::MessageType::kHeartbeat) {
        registered_ = true;
      } else if (message.type == protocol::MessageType::kAssign) {
        protocol::Assign assign = protocol::from_wire<protocol::Assign>(message);
        held_.insert(assign.job.id);
        assigns_.push_back(std::move(assign));
      } else {
        unexpected_.push_back(std::string(protocol::message_type_name(message.type)));
      }
      parts.clear();
    }
  }

  // The oldest ASSIGN not taken yet, if one has arrived.
  std::optional<protocol::Assign> take_assign() {
    if (assigns_.empty()) return std::nullopt;
    protocol::Assign first = std::move(assigns_.front());
    assigns_.erase(assigns_.begin());
    return first;
  }

  const std::vector<std::string>& unexpected() const { return unexpected_; }
  zmq::socket_t& socket() { return socket_; }

 private:
  template <typename Message>
  void send(const Message& message) {
    const std::vector<std::string> frames = protocol::to_frames(protocol::to_wire(message));
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    zmq::send_multipart(socket_, buffers);
  }

  std::string name_;
  zmq::socket_t socket_;
  bool registered_ = false;
  std::set<std::string> held_;
  std::vector<protocol::Assign> assigns_;
  std::vector<std::string> unexpected_;
};

}  // namespace flashq::testing
