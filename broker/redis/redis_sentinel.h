// The Sentinels of one Redis primary (a redis+sentinel:// URL): asked in turn which node is the
// primary now (SENTINEL get-master-addr-by-name), so that a broker follows a failover. Their
// answer can be stale (a Sentinel cut off from the others, or one asked mid-failover): the caller
// checks with ROLE that the node it names is a primary before writing there.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "broker/redis/redis_url.h"

namespace flashq {

class RedisSentinel {
 public:
  // `timeout` bounds the connection to and the answer of each Sentinel.
  RedisSentinel(const RedisUrl& url, std::chrono::milliseconds timeout);

  // The primary's address as the first Sentinel that knows the master name says; nothing when
  // none answers, and then `why` says what each one did. Blocks for up to `timeout` per
  // Sentinel that does not answer.
  std::optional<RedisAddress> find_primary(std::string& why);

 private:
  std::optional<RedisAddress> ask(const RedisAddress& sentinel, std::string& why) const;

  std::vector<RedisAddress> sentinels_;  // the last one that answered first
  std::string master_name_;
  std::string password_;
  std::chrono::milliseconds timeout_;
};

}  // namespace flashq
