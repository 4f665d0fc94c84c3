// Where a broker's Redis is: redis://[[user]:password@]host[:port][/db]. Also `unix:///path[?db=N]`.
#pragma once

#include <cstdint>
#include <string>

namespace flashq {

struct RedisUrl {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_path;  // set for unix:// URLs
  std::string username;   // empty: the default user
  std::string password;   // empty: no AUTH
  int64_t database = 0;

  // The URL with the password masked, for logs.
  std::string describe() const;
};

// kBadConfig naming the part that is wrong.
RedisUrl parse_redis_url(const std::string& url);

}  // namespace flashq
