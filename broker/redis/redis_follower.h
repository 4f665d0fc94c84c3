// The jobs a broker on Redis follows without running them: accepted here and taken by another
// broker, or subscribed to here and run anywhere. Their result streams (flashq:out:{<id>}) are read
// from where this broker is and reported as EventsRelayed, in the same XREAD as flashq:control,
// whose cancel requests are reported as CancelRequested. A subscription to a job that Redis does
// not know yet (not taken, or not even submitted) is asked about again until the job appears or
// its last subscriber leaves. Part of RedisJobStore: it shares its pipeline and its outcomes.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_pipeline.h"
#include "broker/store_outcome.h"

namespace flashq {

class RedisFollower {
 public:
  RedisFollower(RedisPipeline& pipeline, StoreOutcomes& outcomes) : pipeline_(pipeline), outcomes_(outcomes) {}

  // After a (re)connect, with nothing outstanding: the first time, cancel requests made before
  // this broker started are skipped. Throws Error(kIo) when the connection breaks.
  void on_connect(RedisConnection& connection);
  // The connection was lost: no read is in flight any more.
  void on_connection_lost() { relaying_ = checking_awaited_ = false; }

  // Once per loop turn: the result streams and flashq:control, then the awaited subscriptions.
  void turn(SteadyClock::time_point now) {
    relay(now);
    check_awaited(now);
  }

  // The broker holds job `id` without running it: its result stream is read from the start.
  void follow(const std::string& id);
  void unfollow(const std::string& id) { followed_.erase(id); }
  // Asks whether Redis knows job `id` (a CANCEL sent on, a new subscriber): JobKnown when it does.
  void ask_known(const std::string& id);
  // The broker has job `id` (taken here): no longer awaited.
  void known_here(const std::string& id) { awaited_.erase(id); }
  // A subscriber came for a job the broker does not hold, or left.
  void subscription_changed(const std::string& id, bool subscribed);

 private:
  void relay(SteadyClock::time_point now);
  void check_awaited(SteadyClock::time_point now);

  RedisPipeline& pipeline_;
  StoreOutcomes& outcomes_;
  std::map<std::string, std::string> followed_;  // job id -> the last result entry read
  bool relaying_ = false;     // an XREAD of remote jobs' results is in flight
  bool relay_again_ = false;  // the last read brought entries: more may be on the way
  SteadyClock::time_point last_relay_;
  static constexpr std::chrono::milliseconds kReadInterval{5};
  std::set<std::string> awaited_;  // subscribed here, not (yet) known to Redis
  bool checking_awaited_ = false;  // a round of check_awaited is in flight
  SteadyClock::time_point last_await_check_;
  static constexpr std::chrono::milliseconds kAwaitedCheckInterval{100};
  static constexpr size_t kMaxAwaitedSubscriptions = 4096;  // beyond: only jobs Redis knows are followed
  std::string control_from_;  // flashq:control is read after this entry
};

}  // namespace flashq
