// Whole multipart messages in and out of a ZeroMQ socket, with millisecond deadlines: the one
// framing layer under every flashq socket (the client's, the gateway's and the worker's DEALERs,
// the subscribers' SUBs; the broker's ROUTERs add the peer's identity, router_socket.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "shared/protocol/wire.h"

namespace flashq {

inline constexpr std::int64_t kNoDeadline = -1;

// Milliseconds on a monotonic clock.
std::int64_t steady_now_ms();
// The deadline `timeout_ms` from now; 0 means none (kNoDeadline).
std::int64_t deadline_after_ms(int timeout_ms);

// What every flashq socket sets: no linger (nothing sent must outlive its socket unless a caller
// says so) and the protocol's largest frame; with `high_water_mark`, that bound both ways.
void configure_socket(zmq::socket_t& socket, std::optional<int> high_water_mark = std::nullopt);

// Sends all frames without blocking; kIo when the socket cannot take them (no connection that
// completed its handshake, or its queue is full).
void send_frames(zmq::socket_t& socket, std::span<const std::string> frames, std::string_view endpoint);
void send_message(zmq::socket_t& socket, const protocol::WireMessage& message, std::string_view endpoint);

// Sends without blocking; false when the socket cannot take it (the message is not sent).
bool try_send_message(zmq::socket_t& socket, const protocol::WireMessage& message);

// One whole message, or nothing once `deadline_ms` passes (kNoDeadline: wait as long as it takes).
std::optional<std::vector<std::string>> receive_frames(zmq::socket_t& socket, std::int64_t deadline_ms);

// One whole message if one is waiting, at once: no poll, for a loop that drains a socket its own
// poll found readable (one system call fewer per message).
std::optional<std::vector<std::string>> try_receive_frames(zmq::socket_t& socket);

// The frames as views, for the protocol's decoders.
std::vector<std::string_view> frame_views(const std::vector<std::string>& frames);

}  // namespace flashq
