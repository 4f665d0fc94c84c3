// Commands collected during turns of the broker's loop and sent to Redis without waiting: their
// replies come back while the loop goes on serving ZeroMQ, and each runs its handler, in order.
// Writes that must not be lost (events, finals, acknowledgements) stay queued while Redis is
// unreachable and go first once it is back; they are idempotent (redis_schema.h), so sending a
// half-executed batch again is safe. Reads are dropped instead: their handler sees an error.
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

  void add(RedisCommand command, Handler handler, OnFailure on_failure);
  // Nothing queued and nothing awaiting a reply.
  bool empty() const { return pending_.empty() && in_flight_.empty(); }
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
  };
  void run_handler(const RedisReply& reply);
  bool lost(const std::string& why);

  std::deque<Pending> pending_;    // not sent yet
  std::deque<Pending> in_flight_;  // sent; their replies come in this order
};

}  // namespace flashq
