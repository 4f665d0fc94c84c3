// A broker and its workers as real processes for a benchmark: flashq-broker and flashq-worker
// (found beside flashq-bench) on loopback ports chosen free by binding port 0 and releasing it,
// their output in log files, each killed and reaped when the cluster goes. Each serves /metrics,
// read as Prometheus text, so a figure can be taken from the counters the programs keep.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace flashq::bench {

// The directory of the running executable (where flashq-broker and flashq-worker are built).
std::filesystem::path executable_dir();

// A loopback TCP port that was free a moment ago: bound to port 0, read back, released.
int free_port();

// A child process, its stdout and stderr to `log`; SIGKILLed and reaped on destruction.
class ChildProgram {
 public:
  // kIo naming the program when it cannot be started.
  ChildProgram(const std::filesystem::path& program, const std::vector<std::string>& args,
               const std::filesystem::path& log, const std::vector<std::string>& environment = {});
  ~ChildProgram();
  ChildProgram(const ChildProgram&) = delete;
  ChildProgram& operator=(const ChildProgram&) = delete;

  bool running();
  // The last lines of its log, for an error message.
  std::string log_tail() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::filesystem::path log_;
};

// The body of GET http://127.0.0.1:port/path, or nothing when it does not answer 200.
std::optional<std::string> http_get(int port, const std::string& path,
                                    std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

// The sum of every sample of `name` (any labels) in Prometheus text; nothing when there is none.
std::optional<double> metric_sum(const std::string& text, const std::string& name);

struct ClusterOptions {
  std::filesystem::path bin_dir;  // where flashq-broker and flashq-worker are
  std::filesystem::path log_dir;
  std::vector<std::string> broker_args;  // besides the endpoints
  int workers = 3;
  std::vector<std::string> worker_args;  // besides --broker, --id and --metrics-http
};

class BenchCluster {
 public:
  // Starts the broker, then the workers, and waits until the broker counts every worker
  // registered; kIo naming the program whose log says why, when one does not come up.
  explicit BenchCluster(const ClusterOptions& options);
  ~BenchCluster();

  std::string frontend() const;
  int broker_http_port() const { return broker_http_; }
  const std::vector<int>& worker_http_ports() const { return worker_http_; }
  // Sum over the workers of a metric (a worker without it counts 0; `present` says whether any
  // has it: a worker shows some only once it has run a job); kIo when a worker does not answer.
  double worker_metric_sum(const std::string& name, bool* present = nullptr) const;

 private:
  int frontend_port_, backend_port_, stream_port_, broker_http_;
  std::vector<int> worker_http_;
  std::unique_ptr<ChildProgram> broker_;
  std::vector<std::unique_ptr<ChildProgram>> workers_;
};

}  // namespace flashq::bench
