// The broker (docs/architecture.md, docs/protocol.md §9): one thread, one poll loop over three sockets.
//  - frontend ROUTER: producers SUBMIT, CANCEL and ask STATUS;
//  - backend ROUTER: workers register (READY), beat, stream TOKENS and report FINAL;
//  - stream XPUB: every job's events under "job/<id>", for any subscriber.
// This file pair holds the loop, admission, the workers' side and the timers. Its parts:
//  - Dispatcher (dispatcher.h): which queued job starts next, on which worker;
//  - StreamFanout (stream_fanout.h): events to subscribers and producers, the replay buffer;
//  - JobStore (job_store.h): where jobs and results are kept, in memory or on Redis. The store
//    reports what happened to its writes and reads (store_outcome.h); admission, dispatch and the
//    job table are decided here alone.
// Sends never block: every socket sends with ZMQ_DONTWAIT and ROUTER_MANDATORY, and a peer that
// cannot take a message (gone, or over its high-water mark) loses that message, never the broker's
// time. A slow subscriber only loses its own events.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "broker/broker_options.h"
#include "broker/dispatcher.h"
#include "shared/http/http_endpoint.h"
#include "broker/job_queue.h"
#include "broker/job_store.h"
#include "broker/job_table.h"
#include "broker/metrics.h"
#include "broker/model_catalog.h"
#include "shared/transport/router_socket.h"
#include "broker/stream_fanout.h"
#include "broker/worker_registry.h"
#include "broker/zap_handler.h"
#include "shared/protocol/messages.h"

namespace flashq {

class Broker final {
 public:
  // Binds the three sockets (kIo naming the endpoint when one cannot be bound). With
  // options.curve_secret_key they are CURVE servers and a ZAP handler in `context` admits the
  // allow-list only; bad keys or a missing allow-list are typed errors, before anything binds.
  Broker(zmq::context_t& context, BrokerOptions options);

  // Serves until `stop` is set, then drains: refuses new jobs and lets running ones finish for up
  // to drain_timeout_ms; jobs still unfinished then end with `error`.
  void run(const std::atomic<bool>& stop);

  // The endpoints actually bound (a "tcp://127.0.0.1:*" request becomes a real port).
  std::string frontend_endpoint() const;
  std::string backend_endpoint() const;
  std::string stream_endpoint() const;
  int http_port() const { return http_ ? http_->port() : 0; }
  const BrokerMetrics& metrics() const { return metrics_; }

 private:
  void serve_frontend();
  void serve_backend();
  void on_submit(const std::string& producer, protocol::Submit submit);
  void on_cancel(const std::string& producer, const protocol::Cancel& cancel);
  void on_status(const std::string& producer, const protocol::Status& status);
  void on_replay(const std::string& producer, const protocol::Replay& replay);
  void on_ready(const std::string& worker, protocol::Ready ready);
  void on_tokens(WorkerRecord& worker, const protocol::Tokens& tokens);
  void on_final(WorkerRecord& worker, const protocol::Final& final_message);

  void start(JobRecord& job, WorkerRecord& worker);
  void check_timers();
  // `identity` by value: callers may pass the worker record's own string, which this removes.
  void lose_worker(std::string identity, const std::string& why);
  void requeue_as_continuation(JobRecord& job);
  // Numbers the event and hands it to the store; it is delivered once kept, so that what anyone
  // sees is what a later owner of the job continues from.
  void publish(JobRecord& job, protocol::Event event);
  void forget_old_jobs();
  void update_gauges();

  void admit(const std::string& producer, protocol::Job job);
  // An event the store holds (a previous owner's, or one of a job run elsewhere): numbered and
  // delivered without being kept again.
  void relay(JobRecord& job, protocol::Event event);
  // An event published here, now kept: out to subscribers, the producer and replay.
  void deliver(JobRecord& job, const protocol::Event& event);
  void finish(JobRecord& job, protocol::FinalResult result);
  void dispatch();
  // A queued job ends now; a running one when its worker has stopped it (its FINAL says cancelled).
  void cancel(JobRecord& job);
  // The job stops here, wherever it is (queue, worker, finished), because another broker took it.
  void withdraw(JobRecord& job);

  // What the store reported, applied in its order (store_outcome.h).
  void apply(StoreOutcomes outcomes);
  void on_intake(IntakeAnswer answer);
  void on_taken(TakenJob taken);
  void on_caught_up(const CaughtUp& caught);
  void on_events_kept(const EventsKept& kept);
  void on_ownership_lost(const OwnershipLost& lost);
  void on_events_relayed(const EventsRelayed& relayed);
  void on_job_known(const JobKnown& known);
  // A remote job: the broker holds it and relays what the store has of it.
  void hold_remote(JobRecord& job);
  StoreTurn store_turn() const;
  // After a request the store answered at once: what the replies it waited for said.
  void apply_reported();
  // /readyz and flashq_redis_connected follow the store's connection at once.
  void note_store_state();

  template <typename Message>
  void reply_with(const std::string& producer, const Message& message) {
    send_to_peer(frontend_, producer, message);
  }

  BrokerOptions options_;
  BrokerMetrics metrics_;
  std::unique_ptr<HttpEndpoint> http_;
  std::unique_ptr<ZapHandler> zap_;  // with CURVE; declared before the sockets, so it outlives them
  zmq::socket_t frontend_, backend_;
  JobTable jobs_;
  StreamFanout fanout_;  // owns the stream socket
  JobQueue queue_;
  WorkerRegistry workers_;
  ModelCatalog models_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<JobStore> store_;
  bool draining_ = false;
  std::optional<bool> store_connected_;  // as the gauges last said
  uint64_t next_job_number_ = 0;
  SteadyClock::time_point last_heartbeat_sent_;
  SteadyClock::time_point last_timer_check_;
};

}  // namespace flashq
