// The job store on Redis (docs/redis.md): intake into flashq:jobs, taking entries
// as this broker's workers have room (and handing those of a session another live broker owns
// to that broker's stream), events into flashq:out:{<id>} before they go out, finals with
// acknowledgement, and claims of a dead broker's entries; the jobs that other brokers run are
// relayed to this broker's producers and subscribers by its RedisFollower. Everything goes
// through one pipeline per loop turn; nothing here blocks on Redis except STATUS, REPLAY and
// CANCEL of jobs this broker does not hold.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "broker/broker_options.h"
#include "broker/job_queue.h"
#include "broker/job_store.h"
#include "broker/job_table.h"
#include "broker/metrics.h"
#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_follower.h"
#include "broker/redis/redis_pipeline.h"
#include "broker/redis/redis_schema.h"
#include "broker/worker_registry.h"

namespace flashq {

// This broker's consumer name in Redis when none is given: host and frontend endpoint, stable
// across restarts, so a restarted broker finds its own pending entries.
std::string default_redis_consumer(const std::string& frontend_endpoint);

class RedisJobStore final : public JobStore {
 public:
  // Does not connect yet (the first turn does), so a broker starts while Redis is down.
  RedisJobStore(const BrokerOptions& options, const std::string& frontend_endpoint, BrokerCore& core, JobTable& jobs,
                JobQueue& queue, const WorkerRegistry& workers, BrokerMetrics& metrics);

  void submit(const std::string& producer, protocol::Job job) override;
  void store_event(JobRecord& job, protocol::Event event) override;
  void job_started(const std::string& id, int64_t attempt) override;

  bool answer_status(const std::string& producer, const protocol::Status& status) override;
  bool answer_replay(const std::string& producer, const protocol::Replay& replay) override;
  bool cancel_elsewhere(const std::string& producer, const std::string& id) override;
  void subscription_changed(const std::string& id, bool subscribed) override {
    follower_.subscription_changed(id, subscribed);
  }

  void turn() override;
  int poll_fd() const override { return connection_.fd(); }
  // Replies wake the loop; new intake entries do not, so it comes round every few ms to read them.
  std::chrono::milliseconds poll_timeout() const override { return kReadInterval; }
  bool keeps_queued_jobs() const override { return true; }
  std::optional<bool> connected() const override { return ready_; }
  void flush(std::chrono::milliseconds timeout) override;

 private:
  template <typename Message>
  void reply(const std::string& producer, const Message& message) {
    core_.reply(producer, protocol::to_wire(message));
  }

  void connection_lost();
  bool settled();
  void on_connect();
  int64_t free_capacity() const;
  void fetch(SteadyClock::time_point now);
  void read_own_pending(const std::string& stream);
  void take(const std::string& stream, const redis_schema::Entry& entry, bool own_pending);
  // `submitted_ms`: when the job's first entry was written (its deadline and latencies count from it).
  void admit_taken(protocol::Job job, const std::string& stream, const std::string& entry, int64_t submitted_ms,
                   const redis_schema::Take& take);
  void catch_up(const std::string& id, int64_t next_seq);
  void announce_alive();
  void announce_models();
  std::vector<std::string> model_streams_ready();
  void keep_claimed();
  void store_events(const std::string& id);
  void store_final(JobRecord& job, protocol::Event final_event);
  void lost_ownership(const std::string& id);

  RedisOptions options_;
  const bool route_sessions_;  // cache-aware routing: a session's turns go to its owner broker
  const int64_t unknown_model_grace_ms_;  // <= 0: jobs for a model nobody serves wait, never swept
  std::string handover_;       // this broker's handover stream, flashq:jobs:<consumer>
  const int64_t default_deadline_ms_;
  const int64_t retry_after_ms_;
  BrokerCore& core_;
  JobTable& jobs_;
  JobQueue& queue_;
  const WorkerRegistry& workers_;
  BrokerMetrics& metrics_;

  RedisConnection connection_;
  RedisPipeline pipeline_;
  std::map<std::string, std::vector<protocol::Event>> unstored_events_;  // this turn's, per job
  bool ready_ = false;          // connected, group made, own pending entries read
  bool fetching_ = false;       // an XREADGROUP is in flight
  bool fetch_again_ = false;    // the last read came back full: read again at once
  SteadyClock::time_point last_fetch_;
  std::string handed_after_ = "0";  // the last entry of our handover stream read
  bool alive_ = false;              // flashq:broker:<consumer> set by us and not deleted since
  // Models across brokers (docs/redis.md, "Models across brokers").
  std::set<std::string> models_here_;    // served by this broker's workers, as last announced
  std::set<std::string> models_swept_;   // served by nobody for the grace period: their jobs are read here to be rejected
  std::set<std::string> model_groups_;   // model streams whose consumer group exists
  std::set<std::string> making_groups_;  // ... and those whose group is being made
  bool announcing_models_ = false;
  std::map<std::string, std::set<std::string>> taking_;  // entries per stream whose take is not answered yet
  SteadyClock::time_point last_models_announced_;
  static constexpr std::chrono::milliseconds kReadInterval{5};
  RedisFollower follower_{pipeline_, jobs_, core_};  // jobs run elsewhere, flashq:control
  SteadyClock::time_point last_keep_;
};

}  // namespace flashq
