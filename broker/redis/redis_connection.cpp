#include "broker/redis/redis_connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "shared/error.h"

namespace flashq {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = RedisReply::Type::kString; out.text.assign(r->str, r->len); break;
    case REDIS_REPLY_STATUS: out.type = RedisReply::Type::kStatus; out.text.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.type = RedisReply::Type::kError; out.text.assign(r->str, r->len); break;
    case REDIS_REPLY_INTEGER: out.type = RedisReply::Type::kInteger; out.integer = r->integer; break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default: out.type = RedisReply::Type::kNil; break;
  }
  return out;
}

// A Sentinel on the same network answers at once; one that does not is skipped after this.
constexpr std::chrono::milliseconds kSentinelTimeout{300};
// How often the Sentinels are asked where the primary is while there is no connection.
constexpr std::chrono::milliseconds kSentinelInterval{100};

// Error replies of a node that cannot serve us now: a primary demoted by a failover (READONLY),
// one still loading its data after a restart (LOADING), a replica cut off from its primary
// (MASTERDOWN). Elsewhere an error reply is an answer, for the command's handler.
bool node_unavailable(const RedisReply& reply) {
  if (!reply.is_error()) return false;
  for (const char* prefix : {"READONLY", "LOADING", "MASTERDOWN"}) {
    if (reply.text.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

RedisConnection::RedisConnection(RedisUrl url, std::chrono::milliseconds timeout)
    : url_(std::move(url)), timeout_(timeout), node_{.host = url_.host, .port = url_.port} {
  if (url_.uses_sentinels()) sentinel_.emplace(url_, std::min(timeout_, kSentinelTimeout));
}

RedisConnection::~RedisConnection() {
  if (context_) redisFree(context_);
}

void RedisConnection::disconnect(const std::string& why) {
  last_error_ = why;
  if (context_) redisFree(context_);
  context_ = nullptr;
  next_attempt_ = std::chrono::steady_clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(5000));
}

void RedisConnection::fail(const std::string& why) {
  disconnect(why);
  throw Error(ErrorCode::kIo, "redis " + where() + ": " + why);
}

std::string RedisConnection::where() const {
  return sentinel_ ? url_.describe() + " (primary " + node_.describe() + ")" : url_.describe();
}

RedisReply RedisConnection::checked(RedisReply reply) {
  if (node_unavailable(reply)) fail(reply.text);
  return reply;
}

// The backoff is for trying the same node again. The Sentinels are asked more often (they answer
// at once), so that a primary they name anew is connected to as soon as they name it.
std::optional<RedisAddress> RedisConnection::choose_node() {
  const auto now = std::chrono::steady_clock::now();
  if (!sentinel_) {
    if (now < next_attempt_) return std::nullopt;
    return node_;
  }
  if (now < next_sentinel_question_) return std::nullopt;
  next_sentinel_question_ = now + kSentinelInterval;
  std::string why;
  std::optional<RedisAddress> primary = sentinel_->find_primary(why);
  if (!primary) {
    last_error_ = "no Sentinel names the primary '" + url_.master_name + "': " + why;
    return std::nullopt;
  }
  if (*primary == node_) {
    if (now < next_attempt_) return std::nullopt;
    return primary;
  }
  spdlog::info("redis {}: the Sentinels name {} as the primary", url_.describe(), primary->describe());
  node_ = *primary;
  backoff_ = std::chrono::milliseconds(100);
  return primary;
}

bool RedisConnection::ensure_connected() {
  if (context_) return true;
  const std::optional<RedisAddress> node = choose_node();
  if (!node) return false;
  const timeval tv = to_timeval(timeout_);
  redisContext* c = url_.unix_path.empty() ? redisConnectWithTimeout(node->host.c_str(), node->port, tv)
                                           : redisConnectUnixWithTimeout(url_.unix_path.c_str(), tv);
  if (!c || c->err) {
    disconnect(c ? c->errstr : "cannot allocate a connection");
    if (c) redisFree(c);
    return false;
  }
  redisSetTimeout(c, tv);
  context_ = c;
  try {
    std::vector<RedisCommand> setup;
    if (!url_.password.empty()) {
      setup.push_back(url_.username.empty() ? RedisCommand{"AUTH", url_.password}
                                            : RedisCommand{"AUTH", url_.username, url_.password});
    }
    if (url_.database != 0) setup.push_back({"SELECT", std::to_string(url_.database)});
    setup.push_back({"PING"});
    // The Sentinels may name a node that is not (or no longer) the primary: writes there would fail.
    if (sentinel_) setup.push_back({"ROLE"});
    // A restarted Redis has no scripts: load them before anything uses EVALSHA.
    std::vector<std::string*> shas;
    for (auto& [text, sha] : script_shas_) {
      sha.clear();
      setup.push_back({"SCRIPT", "LOAD", text});
      shas.push_back(&sha);
    }
    const std::vector<RedisReply> replies = pipeline(setup);
    for (size_t i = 0; i < replies.size(); ++i) {
      if (replies[i].is_error()) {
        disconnect("refused: " + replies[i].text);
        return false;
      }
    }
    if (sentinel_) {
      const RedisReply& role = replies[replies.size() - shas.size() - 1];
      const std::string said = role.elements.empty() ? role.text : role.elements[0].text;
      if (said != "master") {
        disconnect(node->describe() + " is not the primary (ROLE says " + said + ")");
        return false;
      }
    }
    for (size_t i = 0; i < shas.size(); ++i) *shas[i] = replies[replies.size() - shas.size() + i].text;
  } catch (const Error&) {
    return false;  // pipeline() disconnected and recorded why
  }
  backoff_ = std::chrono::milliseconds(100);
  last_error_.clear();
  return true;
}

void RedisConnection::append(const RedisCommand& command) {
  if (!context_) throw Error(ErrorCode::kIo, "redis " + where() + ": not connected (" + last_error_ + ")");
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& part : command) {
    argv.push_back(part.data());
    lengths.push_back(part.size());
  }
  if (command.size() >= 2 && command[0] == "EVAL") {
    auto script = script_shas_.find(command[1]);
    if (script != script_shas_.end() && !script->second.empty()) {
      argv[0] = "EVALSHA";
      lengths[0] = 7;
      argv[1] = script->second.data();
      lengths[1] = script->second.size();
    }
  }
  if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK) {
    fail(context_->errstr);
  }
}

void RedisConnection::write_out() {
  int done = 0;
  while (!done) {
    if (redisBufferWrite(context_, &done) != REDIS_OK) fail(context_->errstr);
  }
}

std::vector<RedisReply> RedisConnection::pipeline(const std::vector<RedisCommand>& commands) {
  for (const RedisCommand& command : commands) append(command);
  write_out();
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) replies.push_back(read_one());
  return replies;
}

int RedisConnection::fd() const { return context_ ? context_->fd : -1; }

std::vector<RedisReply> RedisConnection::read_ready() {
  if (!context_) throw Error(ErrorCode::kIo, "redis " + where() + ": not connected (" + last_error_ + ")");
  std::vector<RedisReply> replies;
  auto take_parsed = [&] {
    void* raw = nullptr;
    while (true) {
      if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) fail(context_->errstr);
      if (!raw) return;
      RedisReply reply = convert(static_cast<redisReply*>(raw));
      freeReplyObject(raw);
      replies.push_back(checked(std::move(reply)));
    }
  };
  take_parsed();
  pollfd readable{.fd = context_->fd, .events = POLLIN, .revents = 0};
  if (::poll(&readable, 1, 0) > 0) {
    if (redisBufferRead(context_) != REDIS_OK) fail(context_->err ? context_->errstr : "connection lost");
    take_parsed();
  }
  return replies;
}

RedisReply RedisConnection::read_one() {
  if (!context_) throw Error(ErrorCode::kIo, "redis " + where() + ": not connected (" + last_error_ + ")");
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
    fail(context_->err ? context_->errstr : "connection lost");
  }
  RedisReply reply = convert(static_cast<redisReply*>(raw));
  freeReplyObject(raw);
  return checked(std::move(reply));
}

void RedisConnection::register_script(const std::string& text) {
  if (script_shas_.count(text)) return;
  script_shas_[text] = "";
  if (!context_) return;
  try {
    const RedisReply sha = command({"SCRIPT", "LOAD", text});
    if (!sha.is_error()) script_shas_[text] = sha.text;
  } catch (const Error&) {
    // Loaded on the next connect.
  }
}

RedisReply RedisConnection::command(const RedisCommand& command) { return pipeline({command}).front(); }

}  // namespace flashq
