#include "broker/redis/redis_pipeline.h"

#include <algorithm>
#include <vector>

#include "shared/error.h"

namespace flashq {

void RedisPipeline::add(RedisCommand command, Handler handler, OnFailure on_failure, Replication replication) {
  pending_.push_back({std::move(command), std::move(handler), on_failure, replication});
}

size_t RedisPipeline::retained() const {
  auto retried = [](const Pending& p) { return p.on_failure == OnFailure::kRetry; };
  auto held_retried = [](const Held& h) { return h.command.on_failure == OnFailure::kRetry; };
  return static_cast<size_t>(std::count_if(pending_.begin(), pending_.end(), retried) +
                             std::count_if(in_flight_.begin(), in_flight_.end(), retried) +
                             std::count_if(held_.begin(), held_.end(), held_retried));
}

bool RedisPipeline::send(RedisConnection& connection) {
  // A batch with a write that waits for replicas ends with one WAIT, which covers every write
  // sent before it on this connection; so does a batch after a WAIT that fell short.
  const bool needs_wait = std::any_of(pending_.begin(), pending_.end(),
                                      [this](const Pending& p) { return waits_for_replicas(p); }) ||
                          (!held_.empty() && !wait_in_flight_);
  if (needs_wait) {
    pending_.push_back({{"WAIT", std::to_string(replicas_), std::to_string(wait_timeout_ms_)}, nullptr,
                        OnFailure::kDrop, Replication::kPrimary, /*is_wait=*/true});
    wait_in_flight_ = true;
  }
  if (pending_.empty()) return true;
  // In flight from here: if the write fails half-way, lost() queues them again in order.
  const size_t first = in_flight_.size();
  for (Pending& p : pending_) in_flight_.push_back(std::move(p));
  pending_.clear();
  try {
    for (size_t i = first; i < in_flight_.size(); ++i) connection.append(in_flight_[i].command);
    connection.write_out();
  } catch (const Error& e) {
    return lost(e.what());
  }
  return true;
}

void RedisPipeline::run_handler(const RedisReply& reply) {
  Pending done = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (done.is_wait) {
    replicas_answered(reply);
  } else if (waits_for_replicas(done) && !reply.is_error()) {
    held_.push_back({std::move(done), reply});  // a WAIT follows it in flight
  } else if (done.handler) {
    done.handler(reply);
  }
}

// Every held write was sent before this WAIT (replies come in order), so its answer is theirs.
void RedisPipeline::replicas_answered(const RedisReply& reply) {
  const bool another_wait_follows =
      std::any_of(in_flight_.begin(), in_flight_.end(), [](const Pending& p) { return p.is_wait; });
  wait_in_flight_ = another_wait_follows;
  const int64_t acknowledged = reply.is_error() ? 0 : reply.integer;
  std::deque<Held> answered;
  answered.swap(held_);
  for (Held& h : answered) {
    if (acknowledged >= replicas_) {
      if (h.command.handler) h.command.handler(h.reply);
    } else if (h.command.on_failure == OnFailure::kDrop) {
      if (h.command.handler) {
        h.command.handler(RedisReply{.type = RedisReply::Type::kError,
                                     .text = "too few replicas: " + std::to_string(acknowledged) + " of " +
                                             std::to_string(replicas_) + " acknowledged the write"});
      }
    } else {
      held_.push_back(std::move(h));  // answered by a later WAIT (send() adds one)
    }
  }
}

bool RedisPipeline::receive(RedisConnection& connection) {
  if (in_flight_.empty()) return true;
  try {
    for (const RedisReply& reply : connection.read_ready()) run_handler(reply);
  } catch (const Error& e) {
    return lost(e.what());
  }
  return true;
}

bool RedisPipeline::settle(RedisConnection& connection) {
  try {
    while (!in_flight_.empty()) run_handler(connection.read_one());
  } catch (const Error& e) {
    return lost(e.what());
  }
  return true;
}

bool RedisPipeline::lost(const std::string& why) {
  const RedisReply error{.type = RedisReply::Type::kError, .text = "connection lost: " + why};
  std::deque<Pending> kept;
  std::deque<Pending> dropped;
  // Writes the primary took but the replicas may not have: the next primary may lack them, and
  // they are idempotent, so they are sent again, first (they were sent first).
  for (Held& h : held_) (h.command.on_failure == OnFailure::kRetry ? kept : dropped).push_back(std::move(h.command));
  held_.clear();
  wait_in_flight_ = false;
  for (Pending& p : in_flight_) {
    if (!p.is_wait) (p.on_failure == OnFailure::kRetry ? kept : dropped).push_back(std::move(p));
  }
  in_flight_.clear();
  for (Pending& p : pending_) (p.on_failure == OnFailure::kRetry ? kept : dropped).push_back(std::move(p));
  pending_.swap(kept);
  // Handlers run last: what they add goes after the retried writes.
  for (Pending& p : dropped) {
    if (p.handler) p.handler(error);
  }
  return false;
}

}  // namespace flashq
