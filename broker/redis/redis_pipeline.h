// Commands collected during one turn of the broker's loop and sent to Redis as one pipeline.
// Writes that must not be lost (events, finals, acknowledgements) stay queued while Redis is
// unreachable and go first once it is back; they are idempotent (redis_schema.h), so sending a
// half-executed pipeline again is safe. Reads are dropped instead: their handler sees an error.
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
  bool empty() const { return pending_.empty(); }
  size_t size() const { return pending_.size(); }
  // Commands kept for a retry (for a gauge).
  size_t retained() const;

  // Sends what is queued and runs each handler with its reply, in order; handlers may add
  // commands, which wait for the next flush. False when the connection was lost: then kDrop
  // handlers got an error reply and kRetry commands are queued again, in their order.
  bool flush(RedisConnection& connection);

 private:
  struct Pending {
    RedisCommand command;
    Handler handler;
    OnFailure on_failure;
  };
  std::deque<Pending> pending_;
};

}  // namespace flashq
