// A real redis-server for a test: on a free loopback port, in its own directory, with the
// append-only file fsynced on every write, so that a restart (kill, then start again on the same
// port and directory) keeps every acknowledged write, as a durable deployment would.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_cluster.h"
#include "tests/support/child_process.h"

namespace flashq::testing {

class RedisServer {
 public:
  explicit RedisServer(std::filesystem::path dir) : dir_(std::move(dir)), port_(free_port()) {
    std::filesystem::create_directories(dir_);
  }

  // Starts (or restarts) the server and waits until it answers PING.
  bool start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--port",       std::to_string(port_), "--bind", "127.0.0.1",
                                     "--dir",        dir_.string(),         "--save", "",
                                     "--appendonly", "yes",                 "--appendfsync", "always",
                                     "--protected-mode", "no"};
    args.insert(args.end(), extra.begin(), extra.end());
    process_ = std::make_unique<ChildProcess>("/usr/bin/redis-server", args,
                                              dir_ / ("redis-" + std::to_string(++starts_) + ".log"));
    if (!process_->started()) return false;
    return eventually([&] { return ping(); }, std::chrono::milliseconds(10000));
  }
  void kill() {
    if (process_) process_->kill_now();
  }

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  bool ping() const {
    const timeval timeout{0, 200000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, timeout);
    bool ok = false;
    if (c && !c->err) {
      auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
      // With requirepass, NOAUTH also says the server is up.
      ok = reply && (reply->type == REDIS_REPLY_STATUS ||
                     (reply->type == REDIS_REPLY_ERROR && std::string(reply->str).rfind("NOAUTH", 0) == 0));
      if (reply) freeReplyObject(reply);
    }
    if (c) redisFree(c);
    return ok;
  }

 private:
  std::filesystem::path dir_;
  int port_;
  int starts_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

// A producer's view of Redis: plain hiredis, nothing of flashq.
class RedisClient {
 public:
  explicit RedisClient(int port) {
    const timeval timeout{2, 0};
    context_ = redisConnectWithTimeout("127.0.0.1", port, timeout);
  }
  ~RedisClient() {
    if (context_) redisFree(context_);
  }
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  bool ok() const { return context_ && !context_->err; }

  // The reply as text: strings and statuses as they are, integers in decimal, arrays flattened
  // depth-first; nil as "(nil)"; an error as "ERR ...". Empty on a lost connection.
  std::vector<std::string> command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    std::vector<std::string> out;
    if (!ok()) return out;
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (!reply) return out;
    flatten(reply, out);
    freeReplyObject(reply);
    return out;
  }

  // XRANGE key - +: each entry's fields.
  std::vector<std::map<std::string, std::string>> entries(const std::string& key) {
    std::vector<std::map<std::string, std::string>> out;
    if (!ok()) return out;
    auto* reply = static_cast<redisReply*>(redisCommand(context_, "XRANGE %b - +", key.data(), key.size()));
    if (!reply) return out;
    if (reply->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < reply->elements; ++i) {
        const redisReply* entry = reply->element[i];
        if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2) continue;
        std::map<std::string, std::string> fields;
        const redisReply* flat = entry->element[1];
        for (size_t f = 0; f + 1 < flat->elements; f += 2) {
          fields[std::string(flat->element[f]->str, flat->element[f]->len)] =
              std::string(flat->element[f + 1]->str, flat->element[f + 1]->len);
        }
        out.push_back(std::move(fields));
      }
    }
    freeReplyObject(reply);
    return out;
  }

 private:
  static void flatten(const redisReply* r, std::vector<std::string>& out) {
    switch (r->type) {
      case REDIS_REPLY_ARRAY:
        for (size_t i = 0; i < r->elements; ++i) flatten(r->element[i], out);
        break;
      case REDIS_REPLY_INTEGER: out.push_back(std::to_string(r->integer)); break;
      case REDIS_REPLY_NIL: out.push_back("(nil)"); break;
      default: out.emplace_back(r->str, r->len);
    }
  }

  redisContext* context_ = nullptr;
};

}  // namespace flashq::testing
