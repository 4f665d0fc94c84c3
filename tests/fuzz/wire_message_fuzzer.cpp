// libFuzzer target for the wire protocol's decoders: the FQ1 framing and every message type's
// strict msgpack body decoder. An input is [type byte][body]; it is framed as a peer sends it
// (tag, type, body) and decoded as the broker, the worker and the client decode what arrives:
// from_frames, then from_wire with the struct of that type (HEARTBEAT both ways). A refusal is a
// kProtocol flashq::Error; anything else escaping (another exception, a sanitizer report) crashes.
//
// A body that decodes must round-trip: encoded again and decoded, it gives the same message, so
// the fuzzer also hunts values a decoder accepts but the encoder cannot write. A SUBMIT's job is
// also written as a Redis entry's fields, as the broker does with a Redis store.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "broker/redis/redis_job_fields.h"
#include "fuzz_check.h"
#include "shared/protocol/messages.h"
#include "shared/protocol/stream.h"
#include "shared/protocol/wire.h"

namespace {

using namespace flashq::protocol;

template <typename Message>
void decode_as(const WireMessage& wire) {
  const Message message = from_wire<Message>(wire);
  const Message again = decode_body<Message>(encode_body(message));
  flashq::fuzz::require(again == message, "a decoded message encodes to the same message");
}

void decode(const WireMessage& wire) {
  switch (wire.type) {
    case MessageType::kHeartbeat:
      try {
        decode_as<WorkerHeartbeat>(wire);
      } catch (const flashq::Error& e) {
        flashq::fuzz::require_code(e, flashq::ErrorCode::kProtocol);
      }
      decode_as<BrokerHeartbeat>(wire);
      break;
    case MessageType::kDisconnect: decode_as<Disconnect>(wire); break;
    case MessageType::kError: decode_as<ErrorReply>(wire); break;
    case MessageType::kCancel: decode_as<Cancel>(wire); break;
    case MessageType::kSubmit:
      decode_as<Submit>(wire);
      // What a broker with a Redis store writes of the job: its fields, or a typed refusal.
      (void)flashq::job_to_fields(from_wire<Submit>(wire).job);
      break;
    case MessageType::kStatus: decode_as<Status>(wire); break;
    case MessageType::kReplay: decode_as<Replay>(wire); break;
    case MessageType::kModels: decode_as<Models>(wire); break;
    case MessageType::kAccepted: decode_as<Accepted>(wire); break;
    case MessageType::kRejected: decode_as<Rejected>(wire); break;
    case MessageType::kStatusReply: decode_as<StatusReply>(wire); break;
    case MessageType::kEvent: {
      decode_as<Event>(wire);
      // The stream socket's form of the same event: topic frame first.
      const Event event = from_wire<Event>(wire);
      const auto frames = to_stream_frames(event);
      const std::string_view views[] = {frames[0], frames[1], frames[2], frames[3]};
      flashq::fuzz::require(from_stream_frames(views) == event, "a stream event decodes to itself");
      break;
    }
    case MessageType::kModelsReply: decode_as<ModelsReply>(wire); break;
    case MessageType::kReady: decode_as<Ready>(wire); break;
    case MessageType::kTokens: decode_as<Tokens>(wire); break;
    case MessageType::kFinal: decode_as<Final>(wire); break;
    case MessageType::kAssign: decode_as<Assign>(wire); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view frames[] = {kProtocolTag, input.substr(0, 1), input.substr(1)};
  try {
    decode(from_frames(frames));
  } catch (const flashq::Error& e) {
    flashq::fuzz::require_code(e, flashq::ErrorCode::kProtocol);
  }
  return 0;
}
