// Engine thread -> I/O thread: messages ready to send (TOKENS, FINAL), already encoded, and the
// news that a drain has finished. Pushing never blocks on the socket: the queue is unbounded and
// the I/O thread is woken through an eventfd it polls beside its ZeroMQ sockets.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>

#include "shared/protocol/wire.h"

namespace flashq {

struct OutgoingMessage {
  uint64_t link = 0;  // the connection the job came on; sent only while that one is current
  protocol::WireMessage message;
};

class MessageOutbox {
 public:
  MessageOutbox();
  ~MessageOutbox();
  MessageOutbox(const MessageOutbox&) = delete;
  MessageOutbox& operator=(const MessageOutbox&) = delete;

  void push(OutgoingMessage message);
  // Running jobs have all ended after a Drain: the I/O thread may say goodbye.
  void mark_drained();

  // The fd that becomes readable when something was pushed (for zmq_poll).
  int wakeup_fd() const { return wakeup_fd_; }
  // Everything pushed so far; clears the wakeup.
  std::deque<OutgoingMessage> take();
  bool drained() const { return drained_.load(); }

 private:
  void wake();

  int wakeup_fd_ = -1;
  std::mutex mutex_;
  std::deque<OutgoingMessage> messages_;
  std::atomic<bool> drained_{false};
};

}  // namespace flashq
