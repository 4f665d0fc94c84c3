// The worker's I/O thread: the DEALER connected to the broker's backend (docs/protocol.md,
// "Worker messages"). It registers with READY, sends HEARTBEAT {load} every heartbeat interval,
// hands ASSIGN and CANCEL to the engine thread, sends what the engine thread put in the outbox,
// and never runs the model.
//
// Liveness: any message from the broker counts. After `liveness` intervals without one, or when
// the connection closes (a socket monitor sees it at once), or on DISCONNECT from the broker, the
// link is lost: the jobs that came on it are stopped without a FINAL (the broker re-queues them
// as continuations), the DEALER is closed, and after a backoff (doubling up to a cap, +-20%
// jitter, reset once the broker answers) a new DEALER connects and sends READY again.
//
// Shutdown (the shutdown fd becomes readable, e.g. a signalfd for SIGTERM): the worker keeps
// its connection and heartbeats but starts no more jobs: an ASSIGN that arrives is held, not run,
// and goes back to the broker with the final DISCONNECT (which re-queues it). Running jobs finish
// until the drain timeout, then are cancelled with a FINAL each; then DISCONNECT, and run()
// returns. A second shutdown signal cuts the drain short.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "shared/curve/curve_socket.h"
#include "shared/protocol/wire.h"
#include "shared/transport/connection_monitor.h"
#include "worker/process/message_outbox.h"
#include "worker/process/work_inbox.h"

namespace flashq {

struct LinkOptions {
  std::string endpoint;
  protocol::Ready ready;  // sent on every connection
  int64_t heartbeat_ms = 1000;
  int64_t liveness = 3;  // missed heartbeats before the broker counts as dead
  int64_t reconnect_min_ms = 100;
  int64_t reconnect_max_ms = 5000;
  int64_t drain_timeout_ms = 30000;
  int64_t goodbye_linger_ms = 2000;      // how long the last FINALs and DISCONNECT may take to leave
  std::optional<CurveClientKeys> curve;  // CurveZMQ to the broker; none: plain
};

class WorkerBrokerLink {
 public:
  WorkerBrokerLink(zmq::context_t& context, LinkOptions options, WorkInbox& inbox, MessageOutbox& outbox,
                   std::function<int64_t()> load);
  ~WorkerBrokerLink();

  // Serves until a shutdown requested through `shutdown_fd` has drained.
  void run(int shutdown_fd);

 private:
  bool connected() const { return socket_.has_value(); }
  void connect();
  void close_socket(int64_t linger_ms);
  void lose_link(const std::string& why);
  bool send(const protocol::WireMessage& message);

  void receive_messages();
  void on_message(const protocol::WireMessage& message);
  void read_monitor_events();
  void flush_outbox();
  void check_timers();
  void begin_drain();
  int poll_timeout_ms() const;

  zmq::context_t& context_;
  LinkOptions options_;
  WorkInbox& inbox_;
  MessageOutbox& outbox_;
  std::function<int64_t()> load_;

  std::optional<zmq::socket_t> socket_;       // the DEALER, while connected
  std::optional<ConnectionMonitor> monitor_;  // its disconnects, while connected
  uint64_t link_ = 0;                         // connections so far, minus one: tags the work
  SteadyClock::time_point last_heard_, last_heartbeat_sent_, reconnect_at_;
  int64_t backoff_ms_;
  bool draining_ = false;
  std::minstd_rand jitter_;
  std::vector<protocol::Assign> held_;  // assigned while draining: handed back by DISCONNECT
};

}  // namespace flashq
