// The message type byte (frame 1). Values are grouped by who sends them; a name used in two
// directions (CANCEL, HEARTBEAT, DISCONNECT, ERROR) has one value. docs/protocol.md, "Types".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace flashq::protocol {

enum class MessageType : std::uint8_t {
  // Either direction.
  kHeartbeat = 0x01,
  kDisconnect = 0x02,
  kError = 0x03,
  kCancel = 0x04,  // producer -> broker, and broker -> worker
  // Producer -> broker.
  kSubmit = 0x10,
  kStatus = 0x11,
  kReplay = 0x12,
  kModels = 0x13,
  // Broker -> producer (kEvent also on the stream socket).
  kAccepted = 0x20,
  kRejected = 0x21,
  kStatusReply = 0x22,
  kEvent = 0x23,
  kModelsReply = 0x24,
  // Worker -> broker.
  kReady = 0x30,
  kTokens = 0x31,
  kFinal = 0x32,
  // Broker -> worker.
  kAssign = 0x40,
};

inline constexpr std::array<MessageType, 17> kMessageTypes = {
    MessageType::kReplay,    MessageType::kHeartbeat, MessageType::kDisconnect, MessageType::kError,  MessageType::kCancel,
    MessageType::kSubmit,    MessageType::kStatus,     MessageType::kAccepted, MessageType::kRejected,
    MessageType::kStatusReply, MessageType::kEvent,    MessageType::kReady,  MessageType::kTokens,
    MessageType::kFinal,     MessageType::kAssign,    MessageType::kModels, MessageType::kModelsReply,
};

// The upper-case name used in docs/protocol.md and in error messages ("STATUS_REPLY").
std::string_view message_type_name(MessageType type);

// The type with this byte value, or nothing for a byte that names no type.
std::optional<MessageType> message_type_from_byte(std::uint8_t value);

}  // namespace flashq::protocol
