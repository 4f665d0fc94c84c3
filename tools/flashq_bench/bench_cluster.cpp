#include "tools/flashq_bench/bench_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "shared/error.h"

extern char** environ;

namespace flashq::bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string tcp(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }
std::string host_port(int port) { return "127.0.0.1:" + std::to_string(port); }

template <typename Check>
bool eventually(Check check, milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (!check()) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

}  // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  if (port < 0) throw Error(ErrorCode::kIo, "no free loopback port");
  return port;
}

std::filesystem::path executable_dir() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Error(ErrorCode::kIo, "/proc/self/exe: " + error.message());
  return self.parent_path();
}

ChildProgram::ChildProgram(const std::filesystem::path& program, const std::vector<std::string>& args,
                           const std::filesystem::path& log, const std::vector<std::string>& environment)
    : log_(log) {
  std::vector<std::string> all = {program.string()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  // This process's environment, with `environment`'s NAME=value entries in place of their names'.
  std::vector<std::string> env = environment;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const std::string& own : environment) replaced = replaced || own.rfind(name, 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  const int rc = posix_spawn(&pid_, program.c_str(), &files, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0) throw Error(ErrorCode::kIo, program.string() + ": " + std::strerror(rc));
}

ChildProgram::~ChildProgram() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
}

bool ChildProgram::running() {
  if (reaped_) return false;
  int status;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

std::string ChildProgram::log_tail() const {
  std::ifstream in(log_);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

std::optional<std::string> http_get(int port, const std::string& path, milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  std::string raw;
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      pollfd item{fd, POLLIN, 0};
      if (::poll(&item, 1, 50) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      raw.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  const size_t body = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12 || raw.compare(9, 3, "200") != 0 || body == std::string::npos) {
    return std::nullopt;
  }
  return raw.substr(body + 4);
}

std::optional<double> metric_sum(const std::string& text, const std::string& name) {
  std::optional<double> total;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != ' ' && line[name.size()] != '{') continue;
    total = total.value_or(0) + std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return total;
}

BenchCluster::BenchCluster(const ClusterOptions& o)
    : frontend_port_(free_port()), backend_port_(free_port()), stream_port_(free_port()), broker_http_(free_port()) {
  std::filesystem::create_directories(o.log_dir);
  std::vector<std::string> args = {"--frontend",  tcp(frontend_port_),
                                   "--backend",   tcp(backend_port_),
                                   "--stream",    tcp(stream_port_),
                                   "--http",      host_port(broker_http_),
                                   "--log-level", "info"};
  args.insert(args.end(), o.broker_args.begin(), o.broker_args.end());
  broker_ = std::make_unique<ChildProgram>(o.bin_dir / "flashq-broker", args, o.log_dir / "broker.log");
  if (!eventually([&] { return !broker_->running() || http_get(broker_http_, "/healthz"); }, milliseconds(20000)) ||
      !broker_->running()) {
    throw Error(ErrorCode::kIo, "flashq-broker did not start: " + broker_->log_tail());
  }
  for (int w = 0; w < o.workers; ++w) {
    worker_http_.push_back(free_port());
    const std::string id = "w" + std::to_string(w + 1);
    std::vector<std::string> worker = {
        "--broker", tcp(backend_port_), "--id", id, "--metrics-http", host_port(worker_http_.back()), "--log-level",
        "info"};
    worker.insert(worker.end(), o.worker_args.begin(), o.worker_args.end());
    // One OpenMP thread per worker: the workers share the machine's cores.
    workers_.push_back(std::make_unique<ChildProgram>(o.bin_dir / "flashq-worker", worker, o.log_dir / (id + ".log"),
                                                      std::vector<std::string>{"OMP_NUM_THREADS=1"}));
  }
  const auto registered = [&] {
    const std::optional<std::string> metrics = http_get(broker_http_, "/metrics");
    return metrics && metric_sum(*metrics, "flashq_workers") == std::optional<double>(o.workers);
  };
  if (!eventually(
          [&] {
            for (auto& w : workers_) {
              if (!w->running()) return true;
            }
            return registered();
          },
          milliseconds(300000)) ||
      !registered()) {
    for (auto& w : workers_) {
      if (!w->running()) throw Error(ErrorCode::kIo, "a flashq-worker exited: " + w->log_tail());
    }
    throw Error(ErrorCode::kIo, "the workers did not all register with the broker: " + workers_.front()->log_tail());
  }
}

BenchCluster::~BenchCluster() {
  workers_.clear();
  broker_.reset();
}

std::string BenchCluster::frontend() const { return tcp(frontend_port_); }

double BenchCluster::worker_metric_sum(const std::string& name, bool* present) const {
  double total = 0;
  bool any = false;
  for (int port : worker_http_) {
    const std::optional<std::string> metrics = http_get(port, "/metrics");
    if (!metrics)
      throw Error(ErrorCode::kIo, "a worker's /metrics on port " + std::to_string(port) + " did not answer");
    const std::optional<double> value = metric_sum(*metrics, name);
    any = any || value.has_value();
    total += value.value_or(0);
  }
  if (present) *present = any;
  return total;
}

}  // namespace flashq::bench
