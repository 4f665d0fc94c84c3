// Commands collected during turns of the broker's loop and sent to Redis without waiting: their
// replies come back while the loop goes on serving ZeroMQ, and each runs its handler, in order.
// Writes that must not be lost (events, finals, acknowledgements) stay queued while Redis is
// unreachable and go first once it is back; they are idempotent (redis_schema.h), so sending a
// half-executed batch again is safe. Reads are dropped instead: their handler sees an error.
//
// With replicas required (require_replicas: --redis-wait-replicas), a command added with
// Replication::kReplicas has its handler held back until a WAIT sent after it says that enough
// replicas have every write so far: one WAIT closes each batch that holds such a command, so the
// cost is one wait per loop turn, not one per write. A WAIT that falls short answers the held kDrop
// commands with an error (an intake is then refused) and keeps the kRetry ones held for the next
// WAIT; a lost connection sends the held kRetry writes again (a new primary may lack them).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>

#include "broker/redis/redis_connection.h"

namespace flashq {

class RedisPipeline {
 public:
  using Handler = std::function<void(const RedisReply&)>;
  enum class OnFailure { kRetry, kDrop };
  // Whether the handler may run once the primary answered, or only once replicas have the write.
  enum class Replication { kPrimary, kReplicas };

  // `replicas` 0: no command waits for replicas.
  void require_replicas(int64_t replicas, int64_t timeout_ms) {
    replicas_ = replicas;
    wait_timeout_ms_ = timeout_ms;
  }

  void add(RedisCommand command, Handler handler, OnFailure on_failure,
           Replication replication = Replication::kPrimary);
  // Nothing queued, nothing awaiting a reply, nothing held for replicas.
  bool empty() const { return pending_.empty() && in_flight_.empty() && held_.empty(); }
  size_t in_flight() const { return in_flight_.size(); }
  // Writes kept for a retry (for a gauge).
  size_t retained() const;

  // Each of these returns false when the connection was lost: then kDrop handlers got an error
  // reply and kRetry commands are queued again, in their order, ahead of anything newer.
  // Sends what is queued; the replies are awaited by receive() or settle().
  bool send(RedisConnection& connection);
  // Runs the handlers of the replies that have arrived; never waits. Handlers may add commands,
  // which wait for the next send.
  bool receive(RedisConnection& connection);
  // Waits for every reply outstanding (before a blocking command, and at shutdown).
  bool settle(RedisConnection& connection);
  // send() then settle().
  bool flush(RedisConnection& connection) { return send(connection) && settle(connection); }

 private:
  struct Pending {
    RedisCommand command;
    Handler handler;
    OnFailure on_failure;
    Replication replication = Replication::kPrimary;
    bool is_wait = false;  // the WAIT closing a batch
  };
  struct Held {
    Pending command;
    RedisReply reply;
  };
  void run_handler(const RedisReply& reply);
  void replicas_answered(const RedisReply& reply);
  bool waits_for_replicas(const Pending& p) const {
    return replicas_ > 0 && p.replication == Replication::kReplicas;
  }
  bool lost(const std::string& why);

  std::deque<Pending> pending_;    // not sent yet
  std::deque<Pending> in_flight_;  // sent; their replies come in this order
  std::deque<Held> held_;          // answered by the primary, waiting for the replicas
  int64_t replicas_ = 0;
  int64_t wait_timeout_ms_ = 0;
  bool wait_in_flight_ = false;    // a WAIT is sent after every command in held_ and in flight
};

}  // namespace flashq
