#include "shared/shutdown_signal.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "shared/error.h"

namespace flashq {
namespace {

int g_shutdown_fd = -1;

void on_shutdown_signal(int) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(g_shutdown_fd, &one, sizeof one);  // async-signal-safe
}

}  // namespace

int install_shutdown_signals() {
  if (g_shutdown_fd >= 0) return g_shutdown_fd;
  g_shutdown_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (g_shutdown_fd < 0) throw Error(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
  struct sigaction action = {};
  action.sa_handler = on_shutdown_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal_number : {SIGTERM, SIGINT}) {
    if (::sigaction(signal_number, &action, nullptr) != 0) {
      throw Error(ErrorCode::kIo, std::string("sigaction: ") + std::strerror(errno));
    }
  }
  return g_shutdown_fd;
}

}  // namespace flashq
