#include "shared/curve/curve_keys.h"

#include <zmq.h>

#include <array>
#include <cstdint>
#include <filesystem>

#include "shared/error.h"
#include "shared/json_file.h"

namespace flashq {
namespace {

// ZeroMQ's Z85 alphabet (RFC 32).
constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

void check_curve_available() {
  if (!zmq_has("curve")) {
    throw Error(ErrorCode::kUnsupported,
                "CurveZMQ: this libzmq was built without CURVE support (libsodium); keys cannot be used");
  }
}

std::string parse_curve_key(std::string_view text, std::string_view what) {
  const std::string where(what);
  if (text.size() != kCurveKeyZ85Length) {
    throw Error(ErrorCode::kInvalidArgument,
                where + ": a CURVE key is 40 Z85 characters, got " + std::to_string(text.size()));
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (kZ85Alphabet.find(text[i]) == std::string_view::npos) {
      throw Error(ErrorCode::kInvalidArgument,
                  where + ": not a Z85 key: character " + std::to_string(i + 1) + " is outside the Z85 alphabet");
    }
  }
  // Every 5 characters must also stay below 2^32; libzmq's decoder checks that.
  std::string key(text);
  std::array<uint8_t, 32> bytes;
  if (zmq_z85_decode(bytes.data(), key.c_str()) == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, where + ": not a Z85 key: a 5-character group is out of range");
  }
  return key;
}

std::string load_curve_key(const std::string& key_or_file, std::string_view flag) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(key_or_file, ec)) {
    const std::string text = read_text_file(key_or_file);
    try {
      return parse_curve_key(trim(text), key_or_file);
    } catch (const Error& e) {
      throw Error(ErrorCode::kBadConfig, std::string(flag) + " " + e.what());
    }
  }
  const bool looks_like_key =
      key_or_file.size() == kCurveKeyZ85Length && key_or_file.find_first_not_of(kZ85Alphabet) == std::string::npos;
  if (!looks_like_key) {
    throw Error(ErrorCode::kNotFound,
                std::string(flag) + ": no such file '" + key_or_file + "' (and not a 40-character Z85 key)");
  }
  return parse_curve_key(key_or_file, flag);
}

std::string curve_public_key_of(const std::string& secret_key) {
  check_curve_available();
  const std::string secret = parse_curve_key(secret_key, "CURVE secret key");
  std::array<char, kCurveKeyZ85Length + 1> public_key{};
  if (zmq_curve_public(public_key.data(), secret.c_str()) != 0) {
    throw Error(ErrorCode::kInvalidArgument, std::string("CURVE secret key: ") + zmq_strerror(zmq_errno()));
  }
  return std::string(public_key.data(), kCurveKeyZ85Length);
}

CurveKeyPair generate_curve_key_pair() {
  check_curve_available();
  std::array<char, kCurveKeyZ85Length + 1> public_key{}, secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0) {
    throw Error(ErrorCode::kIo, std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
  }
  return {std::string(public_key.data(), kCurveKeyZ85Length), std::string(secret_key.data(), kCurveKeyZ85Length)};
}

}  // namespace flashq
