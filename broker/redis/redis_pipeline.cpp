#include "broker/redis/redis_pipeline.h"

#include <algorithm>
#include <vector>

#include "shared/error.h"

namespace flashq {

void RedisPipeline::add(RedisCommand command, Handler handler, OnFailure on_failure) {
  pending_.push_back({std::move(command), std::move(handler), on_failure});
}

size_t RedisPipeline::retained() const {
  return static_cast<size_t>(
      std::count_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.on_failure == OnFailure::kRetry; }));
}

bool RedisPipeline::flush(RedisConnection& connection) {
  if (pending_.empty()) return true;
  std::deque<Pending> batch;
  batch.swap(pending_);
  std::vector<RedisCommand> commands;
  commands.reserve(batch.size());
  for (const Pending& p : batch) commands.push_back(p.command);
  std::vector<RedisReply> replies;
  try {
    if (!connection.connected()) throw Error(ErrorCode::kIo, "redis is not connected");
    replies = connection.pipeline(commands);
  } catch (const Error& e) {
    RedisReply lost{.type = RedisReply::Type::kError, .text = std::string("connection lost: ") + e.what()};
    std::deque<Pending> kept;
    for (Pending& p : batch) {
      if (p.on_failure == OnFailure::kRetry) {
        kept.push_back(std::move(p));
      } else if (p.handler) {
        p.handler(lost);
      }
    }
    // What handlers added meanwhile goes after the retried writes.
    for (Pending& p : pending_) kept.push_back(std::move(p));
    pending_.swap(kept);
    return false;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].handler) batch[i].handler(replies[i]);
  }
  return true;
}

}  // namespace flashq
