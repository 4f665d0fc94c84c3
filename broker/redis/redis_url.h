// Where a broker's Redis is (docs/redis.md):
//   redis://[[user]:password@]host[:port][/db]
//   unix:///path[?db=N][&password=P][&user=U]
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master-name[/db][?sentinel_password=P]
// In the last, the hosts are Sentinels (port 26379 unless given), asked in turn which node is the
// primary named master-name; user and password are the data nodes', not the Sentinels'. User
// names and passwords are percent-encoded, as in any URL.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashq {

struct RedisAddress {
  std::string host;
  int port = 0;

  std::string describe() const;  // host:port, [host]:port for IPv6
  bool operator==(const RedisAddress&) const = default;
};

struct RedisUrl {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_path;  // set for unix:// URLs
  std::string username;   // empty: the default user
  std::string password;   // empty: no AUTH
  int64_t database = 0;
  // redis+sentinel:// only: host and port above are unused; the primary is whichever node the
  // Sentinels name `master_name` now.
  std::vector<RedisAddress> sentinels;
  std::string master_name;
  std::string sentinel_password;  // the Sentinels' own (their requirepass); empty: no AUTH

  bool uses_sentinels() const { return !sentinels.empty(); }
  // The URL with the passwords masked, for logs.
  std::string describe() const;
  // The URL itself, passwords percent-encoded: parse_redis_url(to_string()) gives this back.
  std::string to_string() const;
};

// kBadConfig naming the part that is wrong.
RedisUrl parse_redis_url(const std::string& url);

}  // namespace flashq
