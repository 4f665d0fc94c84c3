// The job store on Redis (docs/redis.md): intake into flashq:jobs, taking entries
// as this broker's workers have room (and handing those of a session another live broker owns
// to that broker's stream), events into flashq:out:{<id>} before they go out, finals with
// acknowledgement, and claims of a dead broker's entries; the result streams of jobs that other
// brokers run are read by its RedisFollower. Everything goes through one pipeline per loop turn;
// each reply becomes an outcome the broker applies (store_outcome.h), so what the store keeps of
// a job is only its own: the entries it holds, the events not yet written. Nothing here blocks on
// Redis except STATUS, REPLAY and CANCEL of jobs this broker does not hold.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/broker_options.h"
#include "broker/job_store.h"
#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_follower.h"
#include "broker/redis/redis_pipeline.h"
#include "broker/redis/redis_schema.h"

namespace flashq {

// This broker's consumer name in Redis when none is given: host and frontend endpoint, stable
// across restarts, so a restarted broker finds its own pending entries.
std::string default_redis_consumer(const std::string& frontend_endpoint);

class RedisJobStore final : public JobStore {
 public:
  // Does not connect yet (the first turn does), so a broker starts while Redis is down.
  RedisJobStore(const BrokerOptions& options, const std::string& frontend_endpoint);

  std::optional<IntakeAnswer> submit(const std::string& producer, protocol::Job job) override;
  std::optional<protocol::Event> keep_event(protocol::Event event, const std::string& dead_reason) override;
  void job_started(const std::string& id, int64_t attempt) override;
  void leave_pending(const std::string& id, const std::string& entry) override;
  void catch_up(const std::string& id, int64_t next_seq) override;
  void follow(const std::string& id) override { follower_.follow(id); }
  // Unfollowed once run here or finished: a takeover of it is history.
  void unfollow(const std::string& id) override {
    follower_.unfollow(id);
    lost_.erase(id);
  }

  std::optional<protocol::StatusReply> status(const std::string& id) override;
  StoredReplay replay(const protocol::Replay& replay) override;
  std::optional<RemoteCancel> cancel_elsewhere(const std::string& id) override;
  void subscription_changed(const std::string& id, bool subscribed) override {
    follower_.subscription_changed(id, subscribed);
  }

  StoreOutcomes collect() override;
  StoreOutcomes reported() override { return std::exchange(outcomes_, {}); }
  void turn(const StoreTurn& broker) override;
  int poll_fd() const override { return connection_.fd(); }
  // Replies wake the loop; new intake entries do not, so it comes round every few ms to read them.
  std::chrono::milliseconds poll_timeout() const override { return kReadInterval; }
  bool keeps_queued_jobs() const override { return true; }
  std::optional<bool> connected() const override { return ready_; }
  StoreOutcomes flush(std::chrono::milliseconds timeout) override;

 private:
  // An intake entry this broker holds (taken, not finished, not left pending): kept claimed, and
  // acknowledged with the job's final.
  struct HeldEntry {
    std::string stream;
    std::string entry;
  };

  void connection_lost();
  bool settled();
  void on_connect();
  int64_t free_capacity(const StoreTurn& broker) const;
  void fetch(SteadyClock::time_point now, const StoreTurn& broker);
  void read_own_pending(const std::string& stream);
  void take(const std::string& stream, const redis_schema::Entry& entry, bool own_pending);
  // `submitted_ms`: when the job's first entry was written (its deadline and latencies count from it).
  void taken(protocol::Job job, const std::string& stream, const std::string& entry, int64_t submitted_ms,
             const redis_schema::Take& take);
  void announce_alive(const StoreTurn& broker);
  void announce_models(const StoreTurn& broker);
  std::vector<std::string> model_streams_ready();
  void keep_claimed(const StoreTurn& broker);
  void store_events(const std::string& id);
  void store_final(protocol::Event final_event, const std::string& dead_reason);
  void lost_ownership(const std::string& id);

  RedisOptions options_;
  const bool route_sessions_;  // cache-aware routing: a session's turns go to its owner broker
  const int64_t unknown_model_grace_ms_;  // <= 0: jobs for a model nobody serves wait, never swept
  std::string handover_;       // this broker's handover stream, flashq:jobs:<consumer>
  const int64_t default_deadline_ms_;

  RedisConnection connection_;
  RedisPipeline pipeline_;
  StoreOutcomes outcomes_;  // what the replies handled since the last collect() said
  std::map<std::string, std::vector<protocol::Event>> unstored_events_;  // this turn's, per job
  std::map<std::string, HeldEntry> held_;  // by job id
  std::set<std::string> lost_;  // jobs another broker took over from us: nothing more is written
  bool ready_ = false;          // connected, group made, own pending entries read
  bool replies_read_ = false;   // collect() read this turn's replies: turn() may send
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
  RedisFollower follower_{pipeline_, outcomes_};  // jobs run elsewhere, flashq:control
  SteadyClock::time_point last_keep_;
};

}  // namespace flashq
