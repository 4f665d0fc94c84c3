#include "broker/redis/redis_url.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "shared/error.h"

namespace flashq {
namespace {

constexpr int kSentinelPort = 26379;

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

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(const std::string& url, const std::string& text, const char* what) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int high = i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_digit(text[i + 2]) : -1;
    if (high < 0 || low < 0) refuse(url, std::string(what) + " has a '%' not followed by two hex digits");
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

// Everything but RFC 3986's unreserved characters, so that no password can end a URL's part.
std::string percent_encode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += c;
    } else {
      out += '%';
      out += kHex[static_cast<unsigned char>(c) >> 4];
      out += kHex[static_cast<unsigned char>(c) & 15];
    }
  }
  return out;
}

// host[:port] or [v6-address][:port].
RedisAddress parse_address(const std::string& url, const std::string& text, int default_port) {
  RedisAddress out{.host = text, .port = default_port};
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) refuse(url, "'" + text + "' opens an IPv6 address with '[' and never closes it");
    out.host = text.substr(1, close - 1);
    const std::string after = text.substr(close + 1);
    if (!after.empty() && after[0] != ':') refuse(url, "'" + after + "' after an IPv6 address");
    if (!after.empty()) port = after.substr(1);
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    out.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (!port.empty() || text.back() == ':') {
    out.port = static_cast<int>(parse_number(url, port, "port", 65535));
    if (out.port == 0) refuse(url, "port 0");
  }
  if (out.host.empty()) refuse(url, "no host");
  return out;
}

// [[user]:password@]: sets username and password.
void parse_credentials(const std::string& url, const std::string& credentials, RedisUrl& out) {
  const size_t colon = credentials.find(':');
  if (colon == std::string::npos) {
    out.password = percent_decode(url, credentials, "the password");  // redis://secret@host: the password alone
  } else {
    out.username = percent_decode(url, credentials.substr(0, colon), "the user name");
    out.password = percent_decode(url, credentials.substr(colon + 1), "the password");
  }
  if (out.password.empty()) refuse(url, "an empty password");
}

// name=value&...: each name at most once, and only those in `allowed`.
std::map<std::string, std::string> parse_query(const std::string& url, const std::string& query,
                                               const std::vector<std::string>& allowed) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at <= query.size()) {
    size_t end = query.find('&', at);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(at, end - at);
    at = end + 1;
    const size_t equals = pair.find('=');
    const std::string name = pair.substr(0, equals);
    std::string known;
    for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
    if (equals == std::string::npos || std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      refuse(url, "parameter '" + pair + "': the parameters here are " + known + " (name=value)");
    }
    if (out.count(name)) refuse(url, "parameter " + name + " given twice");
    out[name] = percent_decode(url, pair.substr(equals + 1), name.c_str());
  }
  return out;
}

std::string host_for_url(const std::string& host) {
  return host.find(':') == std::string::npos ? host : "[" + host + "]";
}

RedisUrl parse_unix(const std::string& url) {
  RedisUrl out;
  std::string rest = url.substr(7);
  const size_t query = rest.find('?');
  if (query != std::string::npos) {
    auto params = parse_query(url, rest.substr(query + 1), {"db", "password", "user"});
    rest = rest.substr(0, query);
    if (params.count("db")) out.database = parse_number(url, params["db"], "database", 1 << 20);
    if (params.count("user")) out.username = params["user"];
    if (params.count("password")) {
      out.password = params["password"];
      if (out.password.empty()) refuse(url, "an empty password");
    }
  }
  if (rest.empty() || rest[0] != '/') refuse(url, "a unix socket needs an absolute path");
  out.unix_path = rest;
  return out;
}

RedisUrl parse_tcp(const std::string& url) {
  RedisUrl out;
  std::string rest = url.substr(8);
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) out.database = parse_number(url, db, "database", 1 << 20);
  }
  const size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    parse_credentials(url, rest.substr(0, at), out);
    rest = rest.substr(at + 1);
  }
  if (rest.empty()) refuse(url, "no host");
  const RedisAddress address = parse_address(url, rest, out.port);
  out.host = address.host;
  out.port = address.port;
  return out;
}

RedisUrl parse_sentinel(const std::string& url) {
  static constexpr const char* kForm =
      "expected redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master-name[/db]";
  RedisUrl out;
  std::string rest = url.substr(17);
  const size_t query = rest.find('?');
  if (query != std::string::npos) {
    auto params = parse_query(url, rest.substr(query + 1), {"sentinel_password"});
    rest = rest.substr(0, query);
    out.sentinel_password = params["sentinel_password"];
    if (out.sentinel_password.empty()) refuse(url, "an empty sentinel_password");
  }
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) refuse(url, std::string("no master name: ") + kForm);
  std::string path = rest.substr(slash + 1);
  rest = rest.substr(0, slash);
  const size_t db_slash = path.find('/');
  if (db_slash != std::string::npos) {
    const std::string db = path.substr(db_slash + 1);
    path = path.substr(0, db_slash);
    if (!db.empty()) out.database = parse_number(url, db, "database", 1 << 20);
  }
  if (path.empty()) refuse(url, std::string("no master name: ") + kForm);
  out.master_name = percent_decode(url, path, "the master name");
  const size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    parse_credentials(url, rest.substr(0, at), out);
    rest = rest.substr(at + 1);
  }
  if (rest.empty()) refuse(url, std::string("no Sentinel: ") + kForm);
  size_t from = 0;
  while (from <= rest.size()) {
    size_t comma = rest.find(',', from);
    if (comma == std::string::npos) comma = rest.size();
    const std::string one = rest.substr(from, comma - from);
    if (one.empty()) refuse(url, "an empty Sentinel address in '" + rest + "'");
    out.sentinels.push_back(parse_address(url, one, kSentinelPort));
    from = comma + 1;
  }
  return out;
}

}  // namespace

std::string RedisAddress::describe() const { return host_for_url(host) + ":" + std::to_string(port); }

std::string RedisUrl::describe() const {
  const std::string auth = password.empty() ? "" : (username + ":***@");
  if (!unix_path.empty()) return "unix://" + unix_path + "?db=" + std::to_string(database);
  if (uses_sentinels()) {
    std::string out = "redis+sentinel://" + auth;
    for (size_t i = 0; i < sentinels.size(); ++i) out += (i ? "," : "") + sentinels[i].describe();
    out += "/" + master_name + "/" + std::to_string(database);
    return sentinel_password.empty() ? out : out + "?sentinel_password=***";
  }
  return "redis://" + auth + host_for_url(host) + ":" + std::to_string(port) + "/" + std::to_string(database);
}

std::string RedisUrl::to_string() const {
  const std::string auth = password.empty() ? "" : percent_encode(username) + ":" + percent_encode(password) + "@";
  if (!unix_path.empty()) {
    std::string out = "unix://" + unix_path + "?db=" + std::to_string(database);
    if (!password.empty()) out += "&password=" + percent_encode(password);
    if (!username.empty()) out += "&user=" + percent_encode(username);
    return out;
  }
  if (uses_sentinels()) {
    std::string out = "redis+sentinel://" + auth;
    for (size_t i = 0; i < sentinels.size(); ++i) out += (i ? "," : "") + sentinels[i].describe();
    out += "/" + percent_encode(master_name) + "/" + std::to_string(database);
    return sentinel_password.empty() ? out : out + "?sentinel_password=" + percent_encode(sentinel_password);
  }
  return "redis://" + auth + host_for_url(host) + ":" + std::to_string(port) + "/" + std::to_string(database);
}

RedisUrl parse_redis_url(const std::string& url) {
  if (url.rfind("unix://", 0) == 0) return parse_unix(url);
  if (url.rfind("redis://", 0) == 0) return parse_tcp(url);
  if (url.rfind("redis+sentinel://", 0) == 0) return parse_sentinel(url);
  refuse(url, "expected redis://host[:port][/db], redis+sentinel://host[:port][,...]/master-name or unix:///path");
}

}  // namespace flashq
