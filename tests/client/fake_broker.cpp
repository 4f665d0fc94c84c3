#include "tests/client/fake_broker.h"

#include <zmq_addon.hpp>

#include "shared/protocol/stream.h"

namespace flashq::testing {
namespace {

std::vector<std::string> receive_all(zmq::socket_t& socket) {
  std::vector<zmq::message_t> parts;
  if (!zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait)) return {};
  std::vector<std::string> frames;
  for (const zmq::message_t& part : parts) frames.push_back(part.to_string());
  return frames;
}

void send_all(zmq::socket_t& socket, const std::vector<std::string>& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    socket.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

std::string bind_loopback(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::linger, 0);
  socket.bind("tcp://127.0.0.1:*");
  return socket.get(zmq::sockopt::last_endpoint);
}

}  // namespace

FakeBroker::FakeBroker(Script script)
    : router_(context_, zmq::socket_type::router),
      xpub_(context_, zmq::socket_type::xpub),
      script_(std::move(script)) {
  frontend_endpoint_ = bind_loopback(router_);
  stream_endpoint_ = bind_loopback(xpub_);
  thread_ = std::thread([this] { serve(); });
}

FakeBroker::~FakeBroker() {
  stop_ = true;
  thread_.join();
}

void FakeBroker::publish_on_subscribe(const std::string& id, std::vector<protocol::Event> events) {
  std::lock_guard lock(mutex_);
  published_on_subscribe_[id] = std::move(events);
}

std::string FakeBroker::cli_endpoints() const {
  return " --broker " + frontend_endpoint_ + " --stream-endpoint " + stream_endpoint_ + " ";
}

std::vector<protocol::WireMessage> FakeBroker::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

void FakeBroker::serve() {
  while (!stop_) {
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {xpub_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(10));
    if (items[0].revents & ZMQ_POLLIN) answer(router_);
    if (items[1].revents & ZMQ_POLLIN) publish(xpub_);
  }
}

void FakeBroker::answer(zmq::socket_t& router) {
  std::vector<std::string> frames = receive_all(router);
  if (frames.size() != protocol::kMessageFrames + 1) return;
  const std::vector<std::string_view> message(frames.begin() + 1, frames.end());
  const protocol::WireMessage request = protocol::from_frames(message);
  {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
  }
  for (const protocol::WireMessage& reply : script_(request)) {
    std::vector<std::string> out = protocol::to_frames(reply);
    out.insert(out.begin(), frames[0]);
    send_all(router, out);
  }
}

void FakeBroker::publish(zmq::socket_t& xpub) {
  std::vector<std::string> frames = receive_all(xpub);
  // A subscription is one frame: byte 1, then the topic.
  if (frames.size() != 1 || frames[0].empty() || frames[0][0] != 1) return;
  const std::string topic = frames[0].substr(1);
  std::vector<protocol::Event> events;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, scripted] : published_on_subscribe_) {
      if (protocol::stream_topic(id) == topic) events = scripted;
    }
  }
  for (const protocol::Event& event : events) send_all(xpub, protocol::to_stream_frames(event));
}

FakeBroker::Script broker_like(std::vector<protocol::Event> events, protocol::StatusReply status) {
  return [events, status](const protocol::WireMessage& request) -> std::vector<protocol::WireMessage> {
    switch (request.type) {
      case protocol::MessageType::kSubmit: {
        const protocol::Job job = protocol::from_wire<protocol::Submit>(request).job;
        const std::string id = job.id.empty() ? "job-1" : job.id;
        std::vector<protocol::WireMessage> replies = {accepted(id)};
        for (protocol::Event event : events) {
          if (!job.stream && !event.final_result) continue;
          event.id = id;
          replies.push_back(protocol::to_wire(event));
        }
        return replies;
      }
      case protocol::MessageType::kStatus: {
        protocol::StatusReply reply = status;
        reply.id = protocol::from_wire<protocol::Status>(request).id;
        return {protocol::to_wire(reply)};
      }
      case protocol::MessageType::kReplay: {
        // Like the real broker: the scripted events from `from_seq` on, when they are "kept"
        // (seq < status.seq), else replay_unavailable; an unknown job is not_found.
        const protocol::Replay replay = protocol::from_wire<protocol::Replay>(request);
        if (status.state == protocol::JobState::kUnknown) {
          return {protocol::to_wire(protocol::ErrorReply{"not_found", "no job " + replay.id, replay.id})};
        }
        std::vector<protocol::WireMessage> replies;
        for (protocol::Event event : events) {
          if (event.seq < replay.from_seq || event.seq >= status.seq) continue;
          event.id = replay.id;
          replies.push_back(protocol::to_wire(event));
        }
        if (replies.empty() && replay.from_seq < status.seq) {
          return {protocol::to_wire(protocol::ErrorReply{"replay_unavailable", "not kept", replay.id})};
        }
        return replies;
      }
      case protocol::MessageType::kCancel: {
        if (status.state != protocol::JobState::kUnknown) return {};
        const std::string id = protocol::from_wire<protocol::Cancel>(request).id;
        return {protocol::to_wire(protocol::ErrorReply{"not_found", "no job " + id, id})};
      }
      default:
        return {};
    }
  };
}

protocol::WireMessage accepted(const std::string& id) { return protocol::to_wire(protocol::Accepted{id}); }

protocol::Event text_event(const std::string& id, std::int64_t seq, const std::string& text,
                           protocol::TokenIds token_ids) {
  return protocol::Event{id, seq, std::move(token_ids), text, std::nullopt};
}

protocol::Event final_event(const std::string& id, std::int64_t seq, const std::string& text,
                            protocol::TokenIds token_ids, protocol::FinalResult result) {
  return protocol::Event{id, seq, std::move(token_ids), text, std::move(result)};
}

protocol::FinalResult stop_result() {
  protocol::FinalResult result;
  result.finish_reason = protocol::FinishReason::kStop;
  result.usage = {7, 5};
  result.spec_stats = {2, 3, 2.5};
  result.timings = {4, 9, 30};
  return result;
}

}  // namespace flashq::testing
