#include "broker/stream_fanout.h"

#include <array>

#include <zmq_addon.hpp>

#include "shared/transport/router_socket.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/stream.h"

namespace flashq {

StreamFanout::StreamFanout(zmq::context_t& context, const BrokerOptions& options, zmq::socket_t& frontend,
                           JobTable& jobs)
    : stream_(context, zmq::socket_type::xpub),
      frontend_(frontend),
      jobs_(jobs),
      events_per_job_(options.replay_events_per_job),
      bytes_total_(options.replay_bytes_total) {
  stream_.set(zmq::sockopt::sndhwm, options.send_high_water_mark);
  stream_.set(zmq::sockopt::linger, 0);
  stream_.set(zmq::sockopt::maxmsgsize, protocol::kMaxSubscriptionBytes);
}

void StreamFanout::deliver(JobRecord& job, const protocol::Event& event) {
  // Encoded once, for the stream socket, the producer and the replay buffer.
  const protocol::WireMessage wire = protocol::to_wire(event);
  const std::string topic = protocol::stream_topic(job.job.id);
  const std::string type(1, static_cast<char>(wire.type));
  const std::array<zmq::const_buffer, 4> frames = {zmq::buffer(topic), zmq::buffer(protocol::kProtocolTag),
                                                   zmq::buffer(type), zmq::buffer(wire.body)};
  (void)zmq::send_multipart(stream_, frames, zmq::send_flags::dontwait);  // XPUB drops for slow subscribers
  if (!job.producer.empty() && (job.job.stream || event.final_result)) send_to_peer(frontend_, job.producer, wire);
  keep_for_replay(job, wire.body);
}

void StreamFanout::replay(const std::string& producer, const JobRecord& job, const protocol::Replay& replay) {
  if (!holds(job, replay.from_seq)) {
    send_to_peer(frontend_, producer,
                 protocol::ErrorReply{"replay_unavailable",
                                      "job '" + replay.id + "': events are kept from seq " +
                                          std::to_string(job.replay_first_seq) + " on",
                                      replay.id});
    return;
  }
  for (size_t i = static_cast<size_t>(replay.from_seq - job.replay_first_seq); i < job.replay.size(); ++i) {
    send_to_peer(frontend_, producer, protocol::WireMessage{protocol::MessageType::kEvent, job.replay[i]});
  }
}

void StreamFanout::keep_for_replay(JobRecord& job, std::string body) {
  replay_bytes_ += static_cast<int64_t>(body.size());
  job.replay.push_back(std::move(body));
  if (static_cast<int64_t>(job.replay.size()) > events_per_job_) {
    replay_bytes_ -= static_cast<int64_t>(job.replay.front().size());
    job.replay.pop_front();
    ++job.replay_first_seq;
  }
  // Over the total: the oldest finished jobs lose their replay first.
  for (const std::string& id : jobs_.finished_order) {
    if (replay_bytes_ <= bytes_total_) break;
    JobRecord& old = jobs_.jobs.at(id);
    for (const std::string& kept : old.replay) replay_bytes_ -= static_cast<int64_t>(kept.size());
    old.replay_first_seq = old.next_seq;
    old.replay.clear();
  }
}

void StreamFanout::forget(const JobRecord& job) {
  for (const std::string& kept : job.replay) replay_bytes_ -= static_cast<int64_t>(kept.size());
}

void StreamFanout::receive_subscriptions(const std::function<void(const std::string& id, bool subscribed)>& on_change) {
  zmq::message_t subscription;
  while (stream_.recv(subscription, zmq::recv_flags::dontwait)) {
    // XPUB hands up one byte (1 subscribe, 0 unsubscribe) and the topic.
    const std::string_view message = subscription.to_string_view();
    if (message.size() <= 1 || message[0] > 1) continue;
    const std::string_view topic = message.substr(1);
    if (topic.substr(0, protocol::kStreamTopicPrefix.size()) != protocol::kStreamTopicPrefix) continue;
    on_change(std::string(topic.substr(protocol::kStreamTopicPrefix.size())), message[0] == 1);
  }
}

}  // namespace flashq
