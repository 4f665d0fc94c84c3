// One hiredis connection with pipelining and reconnection. The broker's loop sends each turn's
// commands with send() and reads the replies with read_ready() when fd() is readable, so it never
// waits on a round trip; pipeline() and command() are the blocking forms, for set-up and for the
// rare request answered at once (nothing may be outstanding then: RedisPipeline::settle).
// With a redis+sentinel:// URL each connect asks the Sentinels where the primary is and checks
// with ROLE that it is one; a node that answers READONLY, LOADING or MASTERDOWN (a primary
// demoted by a failover, a node still loading its data) counts as a lost connection, so the
// next connect asks again and writes kept for a retry go to the new primary.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/redis/redis_sentinel.h"
#include "broker/redis/redis_url.h"

struct redisContext;

namespace flashq {

struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string text;  // string, status or error
  int64_t integer = 0;
  std::vector<RedisReply> elements;

  bool is_error() const { return type == Type::kError; }
  bool is_nil() const { return type == Type::kNil; }
};

using RedisCommand = std::vector<std::string>;

class RedisConnection {
 public:
  // Does not connect yet: ensure_connected() does, so a broker can start while Redis is down.
  explicit RedisConnection(RedisUrl url, std::chrono::milliseconds timeout = std::chrono::milliseconds(1000));
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Connects (AUTH, SELECT) unless connected; after a failure, waits out a backoff that doubles
  // from 100 ms to 5 s before trying the same node again. With Sentinels, they are asked every
  // 100 ms meanwhile, and a primary they name anew is tried at once. True when connected.
  bool ensure_connected();
  bool connected() const { return context_ != nullptr; }
  // Why the last connect or command failed (for logs and /readyz).
  const std::string& last_error() const { return last_error_; }

  // Sends every command, then reads every reply. A Redis error reply is a reply (kError); a
  // broken connection throws Error(kIo) and disconnects, and the caller retries later.
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands);
  RedisReply command(const RedisCommand& command);

  // The socket, for poll() (-1 when not connected).
  int fd() const;
  // Writes the commands without waiting for their replies: append() each, then write_out().
  void append(const RedisCommand& command);
  void write_out();
  // The replies that have arrived, in order; never waits.
  std::vector<RedisReply> read_ready();
  // The next reply, waiting for it (up to the timeout).
  RedisReply read_one();

  const RedisUrl& url() const { return url_; }
  // The node connected to last (with Sentinels, the primary they named then).
  const RedisAddress& node() const { return node_; }

  // A Lua script sent as EVAL: loaded (SCRIPT LOAD) on every connect, after which an EVAL of
  // exactly this text goes out as EVALSHA, saving the script's bytes on every call.
  void register_script(const std::string& text);

 private:
  void disconnect(const std::string& why);
  [[noreturn]] void fail(const std::string& why);
  std::string where() const;
  // The node to connect to now: the URL's, or the primary the Sentinels name.
  std::optional<RedisAddress> choose_node();
  RedisReply checked(RedisReply reply);

  RedisUrl url_;
  std::chrono::milliseconds timeout_;
  std::optional<RedisSentinel> sentinel_;
  RedisAddress node_;
  redisContext* context_ = nullptr;
  std::string last_error_;
  std::chrono::steady_clock::time_point next_attempt_{};
  std::chrono::steady_clock::time_point next_sentinel_question_{};
  std::chrono::milliseconds backoff_{100};
  std::unordered_map<std::string, std::string> script_shas_;  // text -> sha1, "" until loaded
};

}  // namespace flashq
