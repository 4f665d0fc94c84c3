// End-to-end test support: a flashq-broker and flashq-workers as real processes on loopback, on
// ports chosen free by binding port 0 and releasing it, plus the small HTTP and metrics readers
// the tests need to see the broker's state from outside.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/http_get.h"

namespace flashq::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A loopback TCP port that was free a moment ago: bound to port 0, read back, released.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  int port = -1;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}


// The value of an unlabelled sample `name` in Prometheus text, or the sum over its labels.
inline std::optional<double> metric_value(const std::string& text, const std::string& name) {
  std::optional<double> total;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    const size_t space = line.rfind(' ');
    total = total.value_or(0) + std::atof(line.c_str() + space + 1);
  }
  return total;
}

// Calls `check` every 50 ms until it is true or `timeout` passes; returns its last answer.
template <typename Check>
bool eventually(Check check, milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (true) {
    if (check()) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// A broker and its workers as child processes, with logs under `log_dir`.
class Cluster {
 public:
  explicit Cluster(std::filesystem::path log_dir)
      : log_dir_(std::move(log_dir)),
        frontend_port_(free_port()),
        backend_port_(free_port()),
        stream_port_(free_port()),
        http_port_(free_port()) {}

  std::string frontend() const { return endpoint(frontend_port_); }
  std::string backend() const { return endpoint(backend_port_); }
  std::string stream() const { return endpoint(stream_port_); }
  int frontend_port() const { return frontend_port_; }
  int backend_port() const { return backend_port_; }
  int stream_port() const { return stream_port_; }
  int http_port() const { return http_port_; }

  // Starts flashq-broker on this cluster's ports (again, after a kill: the same ports) and waits
  // until /healthz answers, which it does once every socket is bound. Heartbeats every 200 ms,
  // so a lost worker is noticed after 600 ms. A port taken by someone else between free_port()
  // and the bind makes the first start fail: then it tries again on other ports.
  bool start_broker(const std::vector<std::string>& extra = {}) {
    for (int tries = 0; tries < 3; ++tries) {
      if (launch_broker(extra)) {
        started_once_ = true;
        return true;
      }
      if (started_once_) return false;  // a restart must keep its ports
      frontend_port_ = free_port(), backend_port_ = free_port(), stream_port_ = free_port(), http_port_ = free_port();
    }
    return false;
  }

  ChildProcess& broker() { return *broker_; }
  // start_broker with --redis waits until the broker is connected there, unless this is false.
  bool wait_for_redis_on_start = true;
  bool has_broker() const { return broker_ != nullptr; }

  // Starts a flashq-worker named `name` (replacing a dead one of that name). It beats every
  // 100 ms, well inside the broker's 600 ms, and counts the broker dead after 1 s of silence.
  ChildProcess& start_worker(const std::string& name, const std::filesystem::path& model,
                             const std::filesystem::path& drafter, int slots,
                             const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--broker",   backend(), "--model",        model.string(),
                                     "--id",       name,      "--slots",        std::to_string(slots),
                                     "--device",   "cpu",     "--heartbeat-ms", "100",
                                     "--liveness", "10",      "--log-level",    "info"};
    if (!drafter.empty()) args.insert(args.end(), {"--drafter", drafter.string()});
    args.insert(args.end(), extra.begin(), extra.end());
    // One OpenMP thread per worker: several processes share two cores.
    auto process = std::make_unique<ChildProcess>("flashq-worker", args, next_log(name),
                                                  ChildProcess::Environment{{"OMP_NUM_THREADS", "1"}});
    ChildProcess& out = *process;
    workers_[name] = std::move(process);
    return out;
  }

  ChildProcess& worker(const std::string& name) { return *workers_.at(name); }

  std::optional<double> metric(const std::string& name) {
    const HttpResponse r = http_get(http_port_, "/metrics");
    if (r.status != 200) return std::nullopt;
    return metric_value(r.body, name);
  }

  // Waits until the broker counts exactly `count` registered workers.
  bool wait_for_workers(int count, milliseconds timeout = milliseconds(20000)) {
    return eventually([&] { return metric("flashq_workers") == std::optional<double>(count); }, timeout);
  }

  // Every child's log, for a failure message.
  std::string logs() const {
    std::string out;
    for (const auto& [path, process] : all_logs_) {
      out += "---- " + path.filename().string() + " ----\n";
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      std::string s = text.str();
      if (s.size() > 20000) s = "[...]\n" + s.substr(s.size() - 20000);
      out += s;
    }
    return out;
  }

 private:
  static std::string endpoint(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }

  bool launch_broker(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "--frontend",     frontend(), "--backend",      backend(),
        "--stream",       stream(),   "--http",         "127.0.0.1:" + std::to_string(http_port_),
        "--heartbeat-ms", "200",      "--max-attempts", "10",
        "--log-level",    "info"};
    // A flag given in `extra` replaces the default above.
    for (size_t i = 0; i + 1 < extra.size(); ++i) {
      auto given = std::find(args.begin(), args.end(), extra[i]);
      if (extra[i].rfind("--", 0) == 0 && given != args.end()) args.erase(given, given + 2);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    broker_ = std::make_unique<ChildProcess>("flashq-broker", args, next_log("broker"));
    if (!broker_->started()) return false;
    const bool answers = eventually([&] { return http_get(http_port_, "/healthz").status == 200 || !broker_->running(); },
                                    milliseconds(15000)) &&
                         broker_->running();
    // With Redis, ready means connected there too: until then a broker answers `unavailable`.
    const bool with_redis = wait_for_redis_on_start && std::find(args.begin(), args.end(), "--redis") != args.end();
    return answers && (!with_redis || eventually([&] { return metric("flashq_redis_connected") == std::optional<double>(1); },
                                                 milliseconds(15000)));
  }

  std::filesystem::path next_log(const std::string& name) {
    const std::filesystem::path path = log_dir_ / (name + "-" + std::to_string(++log_count_) + ".log");
    all_logs_.emplace_back(path, name);
    return path;
  }

  std::filesystem::path log_dir_;
  int frontend_port_, backend_port_, stream_port_, http_port_;
  int log_count_ = 0;
  bool started_once_ = false;
  std::vector<std::pair<std::filesystem::path, std::string>> all_logs_;
  // Workers before the broker in destruction order does not matter: each is SIGKILLed.
  std::unique_ptr<ChildProcess> broker_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
};

}  // namespace flashq::testing
