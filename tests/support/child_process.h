// A program run as a child process by a test: one of the executables in FLASHQ_BIN (or any path
// with a slash), started with posix_spawn, its stdout and stderr going to a log file. Killed
// (SIGKILL) and reaped at scope exit if still running, so a failing test leaves nothing behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/run_command.h"

extern char** environ;

namespace flashq::testing {

class ChildProcess {
 public:
  using Environment = std::map<std::string, std::string>;

  // Starts `program` (a name in FLASHQ_BIN, or a path containing '/') with `args`; `env` adds to
  // (or overrides) this process's environment. started() says whether the spawn worked.
  ChildProcess(const std::string& program, const std::vector<std::string>& args, const std::filesystem::path& log_path,
               const Environment& env = {})
      : log_path_(log_path) {
    const std::string path = program.find('/') == std::string::npos ? bin_path(program) : program;
    std::vector<std::string> all = {path};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);

    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      if (!env.count(name)) env_strings.push_back(entry);
    }
    for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    const int rc = posix_spawn(&pid_, path.c_str(), &files, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&files);
    if (rc != 0) {
      pid_ = -1;
      spawn_error_ = path + ": " + std::strerror(rc);
    }
  }
  ~ChildProcess() {
    if (pid_ > 0 && !exit_status_) {
      ::kill(pid_, SIGKILL);
      int status;
      ::waitpid(pid_, &status, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& spawn_error() const { return spawn_error_; }
  const std::filesystem::path& log_path() const { return log_path_; }

  void signal(int sig) {
    if (pid_ > 0 && !exit_status_) ::kill(pid_, sig);
  }

  // SIGKILL, then waits for the process to be gone; returns its exit code (128 + 9).
  std::optional<int> kill_now(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    signal(SIGKILL);
    return wait_exit(timeout);
  }

  // The exit code (128 + signal when killed), or nothing if it is still running after `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!exit_status_) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else if (std::chrono::steady_clock::now() >= until) {
        return std::nullopt;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    return exit_status_;
  }

  // Still running (not exited, or exited without being reaped yet: then it is reaped now).
  bool running() { return started() && !wait_exit(std::chrono::milliseconds(0)); }

  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  std::filesystem::path log_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::string spawn_error_;
};

}  // namespace flashq::testing
