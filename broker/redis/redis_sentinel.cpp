#include "broker/redis/redis_sentinel.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <memory>

namespace flashq {
namespace {

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Reply send(redisContext* c, const std::vector<std::string>& command) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& part : command) {
    argv.push_back(part.data());
    lengths.push_back(part.size());
  }
  return Reply(
      static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data())));
}

}  // namespace

RedisSentinel::RedisSentinel(const RedisUrl& url, std::chrono::milliseconds timeout)
    : sentinels_(url.sentinels), master_name_(url.master_name), password_(url.sentinel_password), timeout_(timeout) {}

std::optional<RedisAddress> RedisSentinel::find_primary(std::string& why) {
  why.clear();
  for (size_t i = 0; i < sentinels_.size(); ++i) {
    std::string failed;
    if (std::optional<RedisAddress> primary = ask(sentinels_[i], failed)) {
      // Asked first from now on: a Sentinel that is down costs a timeout on every reconnect.
      std::rotate(sentinels_.begin(), sentinels_.begin() + static_cast<std::ptrdiff_t>(i),
                  sentinels_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return primary;
    }
    why += (why.empty() ? "" : "; ") + ("sentinel " + sentinels_[i].describe() + ": " + failed);
  }
  return std::nullopt;
}

std::optional<RedisAddress> RedisSentinel::ask(const RedisAddress& sentinel, std::string& why) const {
  const timeval tv{static_cast<time_t>(timeout_.count() / 1000),
                   static_cast<suseconds_t>((timeout_.count() % 1000) * 1000)};
  Context c(redisConnectWithTimeout(sentinel.host.c_str(), sentinel.port, tv));
  if (!c || c->err) {
    why = c ? c->errstr : "cannot allocate a connection";
    return std::nullopt;
  }
  redisSetTimeout(c.get(), tv);
  if (!password_.empty()) {
    const Reply auth = send(c.get(), {"AUTH", password_});
    if (!auth || auth->type == REDIS_REPLY_ERROR) {
      why = auth ? "AUTH refused: " + std::string(auth->str, auth->len) : std::string(c->errstr);
      return std::nullopt;
    }
  }
  const Reply reply = send(c.get(), {"SENTINEL", "get-master-addr-by-name", master_name_});
  if (!reply) {
    why = c->errstr;
    return std::nullopt;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    why = std::string(reply->str, reply->len);
    return std::nullopt;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_STRING ||
      reply->element[1]->type != REDIS_REPLY_STRING) {
    why = "does not know master '" + master_name_ + "'";
    return std::nullopt;
  }
  RedisAddress primary{.host = std::string(reply->element[0]->str, reply->element[0]->len)};
  const std::string port(reply->element[1]->str, reply->element[1]->len);
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), primary.port);
  if (error != std::errc() || end != port.data() + port.size() || primary.port <= 0) {
    why = "named port '" + port + "'";
    return std::nullopt;
  }
  return primary;
}

}  // namespace flashq
