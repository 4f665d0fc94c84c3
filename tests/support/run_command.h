// Runs a shell command and captures its exit code and output (stdout and stderr together), for
// tests of the executables in build/bin (FLASHQ_BIN).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace flashq::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

inline std::string bin_path(const std::string& program) {
  const char* dir = std::getenv("FLASHQ_BIN");
  return std::string(dir ? dir : "build/bin") + "/" + program;
}

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace flashq::testing
