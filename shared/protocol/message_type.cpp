#include "shared/protocol/message_type.h"

namespace flashq::protocol {

std::string_view message_type_name(MessageType type) {
  switch (type) {
    case MessageType::kHeartbeat: return "HEARTBEAT";
    case MessageType::kDisconnect: return "DISCONNECT";
    case MessageType::kError: return "ERROR";
    case MessageType::kCancel: return "CANCEL";
    case MessageType::kSubmit: return "SUBMIT";
    case MessageType::kStatus: return "STATUS";
    case MessageType::kReplay: return "REPLAY";
    case MessageType::kModels: return "MODELS";
    case MessageType::kAccepted: return "ACCEPTED";
    case MessageType::kRejected: return "REJECTED";
    case MessageType::kStatusReply: return "STATUS_REPLY";
    case MessageType::kEvent: return "EVENT";
    case MessageType::kModelsReply: return "MODELS_REPLY";
    case MessageType::kReady: return "READY";
    case MessageType::kTokens: return "TOKENS";
    case MessageType::kFinal: return "FINAL";
    case MessageType::kAssign: return "ASSIGN";
  }
  return "UNKNOWN";
}

std::optional<MessageType> message_type_from_byte(std::uint8_t value) {
  for (MessageType type : kMessageTypes) {
    if (static_cast<std::uint8_t>(type) == value) return type;
  }
  return std::nullopt;
}

}  // namespace flashq::protocol
