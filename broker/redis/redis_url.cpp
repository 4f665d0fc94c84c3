#include "broker/redis/redis_url.h"

#include <charconv>

#include "shared/error.h"

namespace flashq {
namespace {

[[noreturn]] void refuse(const std::string& url, const std::string& why) {
  throw Error(ErrorCode::kBadConfig, "redis URL '" + url + "': " + why);
}

int64_t parse_number(const std::string& url, std::string_view text, const char* what, int64_t max) {
  int64_t value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > max) {
    refuse(url, std::string(what) + " '" + std::string(text) + "' is not a number in 0.." + std::to_string(max));
  }
  return value;
}

}  // namespace

std::string RedisUrl::describe() const {
  std::string auth = password.empty() ? "" : (username + ":***@");
  if (!unix_path.empty()) return "unix://" + unix_path + "?db=" + std::to_string(database);
  return "redis://" + auth + host + ":" + std::to_string(port) + "/" + std::to_string(database);
}

RedisUrl parse_redis_url(const std::string& url) {
  RedisUrl out;
  if (url.rfind("unix://", 0) == 0) {
    std::string rest = url.substr(7);
    const size_t query = rest.find('?');
    if (query != std::string::npos) {
      const std::string params = rest.substr(query + 1);
      rest = rest.substr(0, query);
      if (params.rfind("db=", 0) != 0) refuse(url, "the only parameter is db=N");
      out.database = parse_number(url, std::string_view(params).substr(3), "database", 1 << 20);
    }
    if (rest.empty() || rest[0] != '/') refuse(url, "a unix socket needs an absolute path");
    out.unix_path = rest;
    return out;
  }
  if (url.rfind("redis://", 0) != 0) refuse(url, "expected redis://host[:port][/db] or unix:///path");
  std::string rest = url.substr(8);
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) out.database = parse_number(url, db, "database", 1 << 20);
  }
  const size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    const std::string credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = credentials.find(':');
    if (colon == std::string::npos) {
      out.password = credentials;  // redis://secret@host: the password alone
    } else {
      out.username = credentials.substr(0, colon);
      out.password = credentials.substr(colon + 1);
    }
    if (out.password.empty()) refuse(url, "an empty password");
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']') == std::string::npos) {
    out.port = static_cast<int>(parse_number(url, std::string_view(rest).substr(colon + 1), "port", 65535));
    if (out.port == 0) refuse(url, "port 0");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) refuse(url, "no host");
  out.host = rest;
  return out;
}

}  // namespace flashq
