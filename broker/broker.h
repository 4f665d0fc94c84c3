// The broker (DESIGN.md §1, §4): one thread, one poll loop over three sockets.
//  - frontend ROUTER: producers SUBMIT, CANCEL and ask STATUS;
//  - backend ROUTER: workers register (READY), beat, stream TOKENS and report FINAL;
//  - stream XPUB: every job's events under "job/<id>", for any subscriber.
// Sends never block: every socket sends with ZMQ_DONTWAIT and ROUTER_MANDATORY, and a peer that
// cannot take a message (gone, or over its high-water mark) loses that message, never the broker's
// time. A slow subscriber only loses its own events.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "broker/broker_options.h"
#include "broker/http_endpoint.h"
#include "broker/job_queue.h"
#include "broker/job_record.h"
#include "broker/metrics.h"
#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_pipeline.h"
#include "broker/redis/redis_schema.h"
#include "broker/worker_registry.h"
#include "broker/zap_handler.h"
#include "shared/protocol/messages.h"
#include "shared/protocol/stream.h"
#include "shared/protocol/wire.h"

namespace flashq {

// Roughly 4 bytes of text per token: the queue's bound on prompt tokens before tokenizing.
int64_t estimate_prompt_tokens(const protocol::Job& job);
// This broker's consumer name in Redis when none is given: host and frontend endpoint, stable
// across restarts, so a restarted broker finds its own pending entries.
std::string default_redis_consumer(const std::string& frontend_endpoint);

class Broker {
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
  using Frames = std::vector<std::string>;

  void serve_frontend();
  void serve_backend();
  void on_submit(const std::string& producer, protocol::Submit submit);
  void on_cancel(const std::string& producer, const protocol::Cancel& cancel);
  void cancel_job(JobRecord& job);
  void on_subscription(const zmq::message_t& subscription);
  void on_status(const std::string& producer, const protocol::Status& status);
  void on_replay(const std::string& producer, const protocol::Replay& replay);
  void on_ready(const std::string& worker, protocol::Ready ready);
  void on_tokens(WorkerRecord& worker, const protocol::Tokens& tokens);
  void on_final(WorkerRecord& worker, const protocol::Final& final_message);

  void dispatch();
  void check_timers();
  void lose_worker(const std::string& identity, const std::string& why);
  void requeue_as_continuation(JobRecord& job);
  void finish(JobRecord& job, protocol::FinalResult result);
  // Numbers the event and sends it to subscribers and the producer. With Redis, an event of a job
  // this broker runs goes to Redis first and out once stored (redis_store_events), so that what
  // anyone sees is what a later owner of the job continues from; `store` false: it came from there.
  void publish(JobRecord& job, protocol::Event event, bool store = true);
  void deliver(JobRecord& job, const protocol::Event& event);
  void forget_old_jobs();
  void keep_for_replay(JobRecord& job, std::string body);
  void update_gauges();

  // Redis (broker_redis.cpp), all inert without options.redis.url.
  void redis_turn();
  void redis_connection_lost();
  bool redis_settled();
  void redis_on_connect();
  void redis_submit(const std::string& producer, protocol::Job job);
  void redis_fetch(SteadyClock::time_point now);
  void redis_take(const redis_schema::Entry& entry, bool own_pending);
  void redis_admit(protocol::Job job, const std::string& entry, const redis_schema::Take& take);
  void redis_catch_up(const std::string& id, int64_t next_seq);
  void redis_relay(SteadyClock::time_point now);
  void redis_cancel(const std::string& producer, const std::string& id);
  void redis_follow(const std::string& id);
  void redis_check_awaited(SteadyClock::time_point now);
  void redis_keep_claimed();
  void redis_event(JobRecord& job, protocol::Event event);
  void redis_store_events(const std::string& id);
  void redis_final(JobRecord& job, protocol::Event final_event);
  void redis_lost_ownership(const std::string& id);
  bool redis_status(const std::string& producer, const protocol::Status& status);
  bool redis_replay(const std::string& producer, const protocol::Replay& replay);
  int64_t free_capacity() const;

  bool send(zmq::socket_t& socket, const std::string& identity, const protocol::WireMessage& message);
  template <typename Message>
  bool send_to(zmq::socket_t& socket, const std::string& identity, const Message& message) {
    return send(socket, identity, protocol::to_wire(message));
  }

  BrokerOptions options_;
  BrokerMetrics metrics_;
  std::unique_ptr<HttpEndpoint> http_;
  std::unique_ptr<ZapHandler> zap_;  // with CURVE; declared before the sockets, so it outlives them
  zmq::socket_t frontend_, backend_, stream_;
  JobQueue queue_;
  WorkerRegistry workers_;
  std::map<std::string, JobRecord> jobs_;
  std::deque<std::string> finished_order_;  // oldest first, for bounded retention
  bool draining_ = false;
  int64_t replay_bytes_ = 0;
  uint64_t next_job_number_ = 0;
  std::unique_ptr<RedisConnection> redis_;
  RedisPipeline redis_pipeline_;
  std::map<std::string, std::vector<protocol::Event>> redis_events_;  // this turn's, per job
  bool redis_ready_ = false;       // connected, group made, own pending entries read
  bool redis_fetching_ = false;    // an XREADGROUP is in flight
  bool redis_relaying_ = false;    // an XREAD of remote jobs' results is in flight
  bool redis_fetch_again_ = false;  // the last read came back full: read again at once
  bool redis_relay_again_ = false;
  SteadyClock::time_point redis_last_fetch_;
  SteadyClock::time_point redis_last_relay_;
  static constexpr std::chrono::milliseconds kRedisReadInterval{5};
  std::set<std::string> redis_awaited_;  // subscribed here, not (yet) known to Redis
  bool redis_checking_awaited_ = false;  // a round of redis_check_awaited is in flight
  SteadyClock::time_point redis_last_await_check_;
  static constexpr std::chrono::milliseconds kAwaitedCheckInterval{100};
  static constexpr size_t kMaxAwaitedSubscriptions = 4096;  // beyond: only jobs Redis knows are followed
  std::string redis_control_from_;  // flashq:control is read after this entry
  SteadyClock::time_point redis_last_keep_;
  SteadyClock::time_point last_heartbeat_sent_;
  SteadyClock::time_point last_timer_check_;
};

}  // namespace flashq
