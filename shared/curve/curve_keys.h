// CurveZMQ keys (RFC 26) as flashq handles them: 40-character Z85 text, the form libzmq's socket
// options, `flashq keygen` and key files use. A flag that takes a key takes KEY|FILE: an existing
// file is read (one key, surrounding whitespace ignored), anything else must be the key itself.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flashq {

inline constexpr std::size_t kCurveKeyZ85Length = 40;  // 32 bytes of key

struct CurveKeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// kUnsupported unless this libzmq was built with CURVE (libsodium or its bundled tweetnacl).
void check_curve_available();

// `text` when it is a 40-character Z85 key; otherwise kInvalidArgument naming `what` (the flag or
// file it came from), the length or the first character outside the Z85 alphabet.
std::string parse_curve_key(std::string_view text, std::string_view what);

// The key named by a KEY|FILE flag value: the file's content when a file of that name exists
// (kBadConfig naming the file when it does not hold one key), else the key itself. A value that is
// neither a 40-character Z85 key nor an existing file is kNotFound (a mistyped path is the likely cause).
std::string load_curve_key(const std::string& key_or_file, std::string_view flag);

// The public key that belongs to a secret key (kInvalidArgument for a malformed one).
std::string curve_public_key_of(const std::string& secret_key);

// A fresh key pair from libzmq's random source.
CurveKeyPair generate_curve_key_pair();

}  // namespace flashq
