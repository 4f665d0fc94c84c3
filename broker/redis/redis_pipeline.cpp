#include "broker/redis/redis_pipeline.h"

#include <algorithm>
#include <vector>

#include "shared/error.h"

namespace flashq {

void RedisPipeline::add(RedisCommand command, Handler handler, OnFailure on_failure) {
  pending_.push_back({std::move(command), std::move(handler), on_failure});
}

size_t RedisPipeline::retained() const {
  auto retried = [](const Pending& p) { return p.on_failure == OnFailure::kRetry; };
  return static_cast<size_t>(std::count_if(pending_.begin(), pending_.end(), retried) +
                             std::count_if(in_flight_.begin(), in_flight_.end(), retried));
}

bool RedisPipeline::send(RedisConnection& connection) {
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
  if (done.handler) done.handler(reply);
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
  for (Pending& p : in_flight_) (p.on_failure == OnFailure::kRetry ? kept : dropped).push_back(std::move(p));
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
