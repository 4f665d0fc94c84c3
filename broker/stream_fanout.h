// The stream fan-out (docs/protocol.md §8.5): every event of a job goes out once, to
// the XPUB socket under "job/<id>" for any subscriber, to the job's producer (every event when it
// asked to stream, always the final), and into the job's replay buffer, from which REPLAY serves
// a subscriber that joined late or saw a gap. Sends never wait: XPUB drops a slow subscriber's
// events, and the producer's ROUTER send fails rather than block.
//
// Replay retention is bounded twice: per job (replay_events_per_job, the oldest events go first)
// and in all (replay_bytes_total, the oldest finished jobs lose their buffers first).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <zmq.hpp>

#include "broker/broker_options.h"
#include "broker/job_table.h"
#include "shared/protocol/producer_messages.h"

namespace flashq {

class StreamFanout {
 public:
  // Makes the XPUB socket (the broker secures and binds it). Producers are reached through the
  // broker's `frontend` ROUTER; `jobs` is the table whose finished jobs retention trims.
  StreamFanout(zmq::context_t& context, const BrokerOptions& options, zmq::socket_t& frontend, JobTable& jobs);

  zmq::socket_t& socket() { return stream_; }
  std::string endpoint() const { return stream_.get(zmq::sockopt::last_endpoint); }

  // The event, numbered already, goes out and is kept for replay.
  void deliver(JobRecord& job, const protocol::Event& event);

  // Whether the buffer still holds the job's events from `from_seq` on.
  static bool holds(const JobRecord& job, int64_t from_seq) { return from_seq >= job.replay_first_seq; }
  // REPLAY from the buffer: the events from `replay.from_seq` on, or `replay_unavailable` when the
  // buffer starts later. Only delivered events are kept: with a durable store, the newest may
  // still be on their way into it.
  void replay(const std::string& producer, const JobRecord& job, const protocol::Replay& replay);

  // The job leaves the table: its buffer's bytes no longer count.
  void forget(const JobRecord& job);

  // The (un)subscriptions that came in on the XPUB socket since the last call, as (job id,
  // subscribed), for a store that follows jobs run elsewhere.
  void receive_subscriptions(const std::function<void(const std::string& id, bool subscribed)>& on_change);

 private:
  void keep_for_replay(JobRecord& job, std::string body);

  zmq::socket_t stream_;
  zmq::socket_t& frontend_;
  JobTable& jobs_;
  const int64_t events_per_job_;
  const int64_t bytes_total_;
  int64_t replay_bytes_ = 0;
};

}  // namespace flashq
