// A real redis-sentinel for a test: on a free loopback port, its config written into its own
// directory (Sentinel rewrites that file as it learns), monitoring one primary under a master
// name. Timings are tight (docs/redis.md, "Sentinel and failover"), so that a test sees a
// failover within a few seconds of its primary's death.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/e2e/e2e_cluster.h"
#include "tests/support/child_process.h"

namespace flashq::testing {

struct SentinelSettings {
  std::string master_name = "flashq";
  int quorum = 2;
  // Silence after which this Sentinel thinks the primary is down. Shorter, a Sentinel started on
  // a loaded machine can think so of a live primary before its first PING is answered.
  int64_t down_after_ms = 1000;
  int64_t failover_timeout_ms = 3000;
  std::string data_password;  // the primary's and replicas' requirepass (sentinel auth-pass)
  std::string own_password;   // this Sentinel's requirepass
};

class SentinelProcess {
 public:
  explicit SentinelProcess(std::filesystem::path dir) : dir_(std::move(dir)), port_(free_port()) {
    std::filesystem::create_directories(dir_);
  }

  // The run id this Sentinel is given (40 hex digits), so that others can be told of it up front.
  std::string id() const {
    std::string digits = std::to_string(port_);
    return std::string(40 - digits.size(), '0') + digits;
  }

  // Writes the config, starts the Sentinel monitoring the primary on `primary_port` and waits
  // until it names that primary. It is told of `others` and of the replicas on `replica_ports`
  // at once (else it learns of them from the primary within seconds).
  bool start(int primary_port, const SentinelSettings& settings, const std::vector<const SentinelProcess*>& others = {},
             const std::vector<int>& replica_ports = {}) {
    settings_ = settings;
    const std::filesystem::path config = dir_ / "sentinel.conf";
    {
      std::ofstream out(config);
      out << "port " << port_ << "\nbind 127.0.0.1\nprotected-mode no\ndir " << dir_.string() << "\n"
          << "sentinel monitor " << settings.master_name << " 127.0.0.1 " << primary_port << " " << settings.quorum
          << "\n"
          << "sentinel down-after-milliseconds " << settings.master_name << " " << settings.down_after_ms << "\n"
          << "sentinel failover-timeout " << settings.master_name << " " << settings.failover_timeout_ms << "\n"
          << "sentinel parallel-syncs " << settings.master_name << " 1\n"
          << "sentinel myid " << id() << "\n";
      for (const SentinelProcess* other : others) {
        out << "sentinel known-sentinel " << settings.master_name << " 127.0.0.1 " << other->port() << " "
            << other->id() << "\n";
      }
      for (int port : replica_ports) {
        out << "sentinel known-replica " << settings.master_name << " 127.0.0.1 " << port << "\n";
      }
      if (!settings.data_password.empty()) {
        out << "sentinel auth-pass " << settings.master_name << " " << settings.data_password << "\n";
      }
      if (!settings.own_password.empty()) out << "requirepass " << settings.own_password << "\n";
    }
    process_ = std::make_unique<ChildProcess>("/usr/bin/redis-sentinel", std::vector<std::string>{config.string()},
                                              dir_ / "sentinel.log");
    if (!process_->started()) return false;
    return eventually([&] { return primary_port_now() == primary_port; }, std::chrono::milliseconds(10000));
  }
  void kill() {
    if (process_) process_->kill_now();
  }

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return process_ ? process_->log() : ""; }

  // The primary's port as this Sentinel names it now; nothing when it does not answer.
  std::optional<int> primary_port_now() const {
    std::optional<int> port;
    ask("get-master-addr-by-name", [&](const redisReply* reply) {
      if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2) port = std::atoi(reply->element[1]->str);
    });
    return port;
  }

  // A number from SENTINEL MASTER (num-slaves, num-other-sentinels, ...); -1 when there is none.
  int64_t master_field(const std::string& field) const {
    int64_t value = -1;
    ask("MASTER", [&](const redisReply* reply) {
      if (reply->type != REDIS_REPLY_ARRAY) return;
      for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        if (field == reply->element[i]->str) value = std::atoll(reply->element[i + 1]->str);
      }
    });
    return value;
  }

 private:
  // SENTINEL `subcommand` <master name>; `read` sees the reply, if one came.
  template <typename Read>
  void ask(const char* subcommand, Read read) const {
    const timeval timeout{0, 300000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, timeout);
    if (c && !c->err) {
      bool authenticated = true;
      if (!settings_.own_password.empty()) {
        auto* auth = static_cast<redisReply*>(redisCommand(c, "AUTH %s", settings_.own_password.c_str()));
        authenticated = auth && auth->type == REDIS_REPLY_STATUS;
        if (auth) freeReplyObject(auth);
      }
      const char* argv[] = {"SENTINEL", subcommand, settings_.master_name.c_str()};
      auto* reply = authenticated ? static_cast<redisReply*>(redisCommandArgv(c, 3, argv, nullptr)) : nullptr;
      if (reply) read(reply);
      if (reply) freeReplyObject(reply);
    }
    if (c) redisFree(c);
  }

  std::filesystem::path dir_;
  int port_;
  SentinelSettings settings_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace flashq::testing
