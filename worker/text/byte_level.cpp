#include "worker/text/byte_level.h"

#include <array>

#include "worker/text/utf8.h"

namespace flashq {
namespace {

bool is_printable_as_itself(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
}

struct ByteLevelAlphabet {
  std::array<std::string, 256> char_of_byte;
  std::array<int16_t, 324> byte_of_code_point;  // -1 where the code point is not in the alphabet

  ByteLevelAlphabet() {
    byte_of_code_point.fill(-1);
    char32_t next_extra = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      char32_t cp = is_printable_as_itself(byte) ? static_cast<char32_t>(byte) : next_extra++;
      append_utf8(char_of_byte[byte], cp);
      byte_of_code_point[cp] = static_cast<int16_t>(byte);
    }
  }
};

const ByteLevelAlphabet& alphabet() {
  static const ByteLevelAlphabet instance;
  return instance;
}

}  // namespace

std::string_view byte_level_char(uint8_t byte) { return alphabet().char_of_byte[byte]; }

std::string bytes_to_byte_level(std::string_view bytes) {
  const ByteLevelAlphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out.append(a.char_of_byte[static_cast<uint8_t>(c)]);
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  const ByteLevelAlphabet& a = alphabet();
  if (!is_valid_utf8(token)) return std::nullopt;
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    char32_t cp = next_code_point(token, pos);
    if (cp >= a.byte_of_code_point.size() || a.byte_of_code_point[cp] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(a.byte_of_code_point[cp]));
  }
  return bytes;
}

}  // namespace flashq
