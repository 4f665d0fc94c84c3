#include "shared/protocol/wire.h"

#include <cstdio>
#include <cstdlib>

#include "shared/protocol/limits.h"

namespace flashq::protocol {
namespace {

[[noreturn]] void fail(const std::string& problem) { throw Error(ErrorCode::kProtocol, problem); }

// Peer bytes as hex, for an error message; at most 16 of them.
std::string hex_bytes(std::string_view bytes) {
  std::string out;
  char digits[4];
  for (unsigned char c : bytes.substr(0, 16)) {
    std::snprintf(digits, sizeof digits, "%02x", c);
    out += digits;
  }
  if (bytes.size() > 16) out += "...";
  return out.empty() ? "(empty)" : out;
}

}  // namespace

void refused_own_encoding(std::string_view what, const std::string& problem) {
  std::fprintf(stderr, "flashq: encoded %.*s refused by its own decoder: %s\n", static_cast<int>(what.size()),
               what.data(), problem.c_str());
  std::abort();
}

std::vector<std::string> to_frames(const WireMessage& message) {
  return {std::string(kProtocolTag), std::string(1, static_cast<char>(message.type)), message.body};
}

WireMessage from_frames(std::span<const std::string_view> frames) {
  if (frames.size() != kMessageFrames) {
    fail("message: expected 3 frames (tag, type, body), got " + std::to_string(frames.size()));
  }
  if (frames[0] != kProtocolTag) fail("frame 0: unknown protocol tag 0x" + hex_bytes(frames[0]) + ", expected FQ1");
  if (frames[1].size() != 1) fail("frame 1: the type must be 1 byte, got " + std::to_string(frames[1].size()));
  const auto type = message_type_from_byte(static_cast<std::uint8_t>(frames[1][0]));
  if (!type) fail("frame 1: unknown message type 0x" + hex_bytes(frames[1]));
  if (frames[2].size() > kMaxBodyBytes) {
    fail(std::string(message_type_name(*type)) + " body: " + std::to_string(frames[2].size()) +
         " bytes, over the limit of " + std::to_string(kMaxBodyBytes));
  }
  return {*type, std::string(frames[2])};
}

}  // namespace flashq::protocol
