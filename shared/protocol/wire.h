// Framing: a message is three ZeroMQ frames, [tag "FQ1"] [type, 1 byte] [body, one msgpack map],
// inside whatever envelope the socket adds (a ROUTER's identity frame). Frames are byte strings
// here; the broker, worker and client move them through their own sockets.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shared/error.h"
#include "shared/protocol/message_type.h"
#include "shared/protocol/messages.h"

namespace flashq::protocol {

inline constexpr std::string_view kProtocolTag = "FQ1";
// No message type uses the optional binary frames yet, so every message has exactly three.
inline constexpr std::size_t kMessageFrames = 3;

struct WireMessage {
  MessageType type = MessageType::kHeartbeat;
  std::string body;
  bool operator==(const WireMessage&) const = default;
};

std::vector<std::string> to_frames(const WireMessage& message);

// Checks the frame count, the tag, the type byte and the body size (not the body's contents:
// decode it with from_wire). kProtocol on any violation.
WireMessage from_frames(std::span<const std::string_view> frames);

// A message this side encoded that its own decoder refuses: a bug here, not the peer's. Aborts
// with both names, so a test (the suite runs Debug builds under the sanitizers) fails loudly.
[[noreturn]] void refused_own_encoding(std::string_view what, const std::string& problem);

template <typename Message>
WireMessage to_wire(const Message& message) {
  WireMessage wire{Message::kType, encode_body(message)};
#ifndef NDEBUG
  // Encode-side checks (docs/protocol.md 4): whatever the decoder range-checks, the
  // encoder never sends; checked by decoding what was encoded, so no range is written twice.
  try {
    (void)decode_body<Message>(wire.body);
  } catch (const Error& e) {
    refused_own_encoding(message_type_name(Message::kType), e.what());
  }
#endif
  return wire;
}

// The body decoded as `Message`; kProtocol when the type is another one or the body is bad.
template <typename Message>
Message from_wire(const WireMessage& wire) {
  if (wire.type != Message::kType) {
    throw Error(ErrorCode::kProtocol, "expected message type " + std::string(message_type_name(Message::kType)) +
                                          ", got " + std::string(message_type_name(wire.type)));
  }
  return decode_body<Message>(wire.body);
}

}  // namespace flashq::protocol
