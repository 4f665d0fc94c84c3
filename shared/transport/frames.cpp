#include "shared/transport/frames.h"

#include <algorithm>
#include <chrono>
#include <zmq_addon.hpp>

#include "shared/error.h"
#include "shared/protocol/limits.h"

namespace flashq {

std::int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t deadline_after_ms(int timeout_ms) { return timeout_ms > 0 ? steady_now_ms() + timeout_ms : kNoDeadline; }

void configure_socket(zmq::socket_t& socket, std::optional<int> high_water_mark) {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, protocol::kMaxFrameBytes);
  if (high_water_mark) {
    socket.set(zmq::sockopt::sndhwm, *high_water_mark);
    socket.set(zmq::sockopt::rcvhwm, *high_water_mark);
  }
}

void send_frames(zmq::socket_t& socket, std::span<const std::string> frames, std::string_view endpoint) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const zmq::send_flags more = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    if (!socket.send(zmq::buffer(frames[i]), more | zmq::send_flags::dontwait)) {
      throw Error(ErrorCode::kIo, "cannot send to " + std::string(endpoint) +
                                      ": no connection takes it (the handshake failed, or the queue is full)");
    }
  }
}

void send_message(zmq::socket_t& socket, const protocol::WireMessage& message, std::string_view endpoint) {
  send_frames(socket, protocol::to_frames(message), endpoint);
}

bool try_send_message(zmq::socket_t& socket, const protocol::WireMessage& message) {
  const std::vector<std::string> frames = protocol::to_frames(message);
  std::vector<zmq::const_buffer> buffers;
  buffers.reserve(frames.size());
  for (const std::string& frame : frames) buffers.push_back(zmq::buffer(frame));
  // A multipart send is atomic: all frames are queued, or none.
  return zmq::send_multipart(socket, buffers, zmq::send_flags::dontwait).has_value();
}

std::optional<std::vector<std::string>> try_receive_frames(zmq::socket_t& socket) {
  std::vector<zmq::message_t> parts;
  // A ZeroMQ message arrives whole, so once one is there every frame is.
  if (!zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait)) return std::nullopt;
  std::vector<std::string> frames;
  frames.reserve(parts.size());
  for (const zmq::message_t& part : parts) frames.push_back(part.to_string());
  return frames;
}

std::optional<std::vector<std::string>> receive_frames(zmq::socket_t& socket, std::int64_t deadline_ms) {
  while (true) {
    std::chrono::milliseconds wait{-1};  // -1: no limit
    if (deadline_ms != kNoDeadline) {
      wait = std::chrono::milliseconds(std::max<std::int64_t>(0, deadline_ms - steady_now_ms()));
    }
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) > 0) {
      if (auto frames = try_receive_frames(socket)) return frames;
    }
    if (deadline_ms != kNoDeadline && steady_now_ms() >= deadline_ms) return std::nullopt;
  }
}

std::vector<std::string_view> frame_views(const std::vector<std::string>& frames) {
  return {frames.begin(), frames.end()};
}

}  // namespace flashq
