#include "worker/text/utf8.h"

#include <cstdint>

namespace flashq {
namespace {

struct LeadByte {
  int continuation_count;  // -1: the byte cannot start a sequence
  uint8_t second_min;      // the range allowed for the first continuation byte excludes
  uint8_t second_max;      // overlongs, surrogates and code points above U+10FFFF
};

LeadByte classify_lead_byte(uint8_t b) {
  if (b < 0x80) return {0, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {-1, 0, 0};
}

// Number of bytes from `pos` that belong to one sequence: a valid one (`valid` set), or the
// maximal prefix of one that cannot be completed (at least one byte).
size_t scan_sequence(std::string_view bytes, size_t pos, bool& valid) {
  LeadByte lead = classify_lead_byte(static_cast<uint8_t>(bytes[pos]));
  valid = false;
  if (lead.continuation_count < 0) return 1;
  size_t length = 1;
  for (int i = 0; i < lead.continuation_count; ++i) {
    if (pos + length >= bytes.size()) return length;
    auto b = static_cast<uint8_t>(bytes[pos + length]);
    uint8_t lo = i == 0 ? lead.second_min : 0x80;
    uint8_t hi = i == 0 ? lead.second_max : 0xBF;
    if (b < lo || b > hi) return length;
    ++length;
  }
  valid = true;
  return length;
}

}  // namespace

size_t utf8_sequence_length(std::string_view bytes, size_t pos) {
  bool valid = false;
  size_t length = scan_sequence(bytes, pos, valid);
  return valid ? length : 0;
}

bool is_valid_utf8(std::string_view bytes) {
  for (size_t pos = 0; pos < bytes.size();) {
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t length = utf8_sequence_length(bytes, pos);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

std::string replace_invalid_utf8(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  for (size_t pos = 0; pos < bytes.size();) {
    bool valid = false;
    size_t length = scan_sequence(bytes, pos, valid);
    if (valid) {
      out.append(bytes.substr(pos, length));
    } else {
      out.append(kReplacementCharacter);
    }
    pos += length;
  }
  return out;
}

char32_t next_code_point(std::string_view text, size_t& pos) {
  auto b = static_cast<uint8_t>(text[pos++]);
  if (b < 0x80) return b;
  int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
  char32_t cp = b & (0x3F >> extra);
  for (int i = 0; i < extra && pos < text.size(); ++i) {
    cp = (cp << 6) | (static_cast<uint8_t>(text[pos++]) & 0x3F);
  }
  return cp;
}

char32_t previous_code_point(std::string_view text, size_t& end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  size_t pos = start;
  char32_t cp = next_code_point(text, pos);
  end = start;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace flashq
