#include "worker/process/message_outbox.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "shared/error.h"

namespace flashq {

MessageOutbox::MessageOutbox() {
  wakeup_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeup_fd_ < 0) throw Error(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
}

MessageOutbox::~MessageOutbox() { ::close(wakeup_fd_); }

void MessageOutbox::push(OutgoingMessage message) {
  {
    std::lock_guard lock(mutex_);
    messages_.push_back(std::move(message));
  }
  wake();
}

void MessageOutbox::mark_drained() {
  drained_.store(true);
  wake();
}

void MessageOutbox::wake() {
  const uint64_t one = 1;
  // Only fails when the counter would overflow, in which case the fd is readable anyway.
  [[maybe_unused]] ssize_t written = ::write(wakeup_fd_, &one, sizeof one);
}

std::deque<OutgoingMessage> MessageOutbox::take() {
  uint64_t count;
  [[maybe_unused]] ssize_t got = ::read(wakeup_fd_, &count, sizeof count);  // EAGAIN when not signalled
  std::lock_guard lock(mutex_);
  std::deque<OutgoingMessage> out;
  out.swap(messages_);
  return out;
}

}  // namespace flashq
