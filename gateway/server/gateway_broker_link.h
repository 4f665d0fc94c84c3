// One connection to one broker, shared by every request of the gateway: a DEALER on the
// broker's frontend over which jobs are submitted (with stream=true, so their events come back
// on it), cancelled, asked about and replayed, and a SUB on its stream socket for jobs this link
// did not submit (a response resumed after a gateway restart). Both sockets live on the link's
// own thread; other threads queue commands, and answers arrive through JobListener and
// callbacks, on the link's thread.
//
// When the connection to the broker closes (the broker died or restarted), the events of jobs
// under way would come no more on it: each such job is followed on the stream socket and
// replayed from its next seq once a broker answers there again (on Redis, a restarted broker
// relays what another broker runs), or fails as unavailable after kAnswerTimeoutMs.
//
// Replies are matched by job id (the gateway names its jobs), so any number of requests share
// the connection. A job may have several listeners (its submitter, and followers that watch it
// from seq 0), each with its own place in the job's events; a listener is held until the job's
// final event, a rejection, a failure, or forget().
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>
#include <zmq.hpp>

#include "gateway/server/job_listener.h"
#include "shared/curve/curve_socket.h"
#include "shared/protocol/messages.h"
#include "shared/protocol/wire.h"
#include "shared/transport/connection_monitor.h"

namespace flashq::gateway {

struct BrokerEndpoints {
  std::string frontend = "tcp://127.0.0.1:5555";
  std::string stream = "tcp://127.0.0.1:5557";
  std::optional<CurveClientKeys> curve;
};

// STATUS's answer: the reply, or the broker's ERROR (or "unavailable" when it did not answer).
using StatusOutcome = std::variant<protocol::StatusReply, protocol::ErrorReply>;
using ModelsOutcome = std::variant<protocol::ModelsReply, protocol::ErrorReply>;

class GatewayBrokerLink {
 public:
  // How long a request waits for the broker's answer before it fails as unavailable.
  static constexpr std::int64_t kAnswerTimeoutMs = 5000;

  explicit GatewayBrokerLink(BrokerEndpoints endpoints);
  ~GatewayBrokerLink();  // stops the thread; listeners still held hear failed("unavailable")
  GatewayBrokerLink(const GatewayBrokerLink&) = delete;
  GatewayBrokerLink& operator=(const GatewayBrokerLink&) = delete;

  const BrokerEndpoints& endpoints() const { return endpoints_; }

  // Sends SUBMIT (`job.id` set, `job.stream` true). The listener hears accepted or rejected, then
  // the events.
  void submit(protocol::Job job, std::shared_ptr<JobListener> listener);
  // Subscribes to job `id`'s stream and asks for its events from seq 0 (REPLAY): the listener
  // hears them all, in order, whether the job is running or finished.
  void watch(const std::string& id, std::shared_ptr<JobListener> listener);
  // `listener` stops hearing about job `id` (it is dropped, silently).
  void forget(const std::string& id, const JobListener* listener);
  // Sends CANCEL; the job's own listener, if any, hears its final event.
  void cancel(const std::string& id);
  void status(const std::string& id, std::function<void(const StatusOutcome&)> done);
  void models(std::function<void(const ModelsOutcome&)> done);

 private:
  using Command = std::function<void()>;  // runs on the link's thread
  struct TrackedJob;

  void post(Command command);
  void run();
  void handle(const protocol::WireMessage& message);
  void deliver(const protocol::Event& event);
  // Drops one listener's tracking (and its stream subscription).
  void drop(const std::string& id, const JobListener* listener);
  // Fails the listeners of `id` still waiting for an answer to their SUBMIT or REPLAY.
  void fail_waiting(const std::string& id, const protocol::ErrorReply& error);
  void expire_answers(std::int64_t now_ms);
  bool send(const protocol::WireMessage& message);
  void read_monitor_events();
  // The connection closed: every job under way is followed again from its next seq.
  void follow_after_disconnect();
  // Sends the REPLAYs of jobs followed again, as far as a connection takes them.
  void send_rejoins();

  BrokerEndpoints endpoints_;
  std::mutex mutex_;
  std::deque<Command> commands_;
  int wake_fd_ = -1;  // eventfd: a command is queued
  std::atomic<bool> stopping_{false};

  // Made before the thread starts, then used by the link's thread only.
  zmq::context_t context_{1};
  zmq::socket_t dealer_;
  zmq::socket_t sub_;
  std::optional<ConnectionMonitor> monitor_;  // the DEALER's disconnects
  std::set<std::string> rejoining_;           // jobs whose REPLAY waits for a connection to take it
  std::multimap<std::string, std::unique_ptr<TrackedJob>> jobs_;
  // Answers awaited, with the time (ms, steady) after which they fail as unavailable. STATUS is
  // matched by id; MODELS replies carry none and come in the order asked.
  std::multimap<std::string, std::pair<std::int64_t, std::function<void(const StatusOutcome&)>>> status_waiters_;
  std::deque<std::pair<std::int64_t, std::function<void(const ModelsOutcome&)>>> models_waiters_;

  std::thread thread_;
};

}  // namespace flashq::gateway
